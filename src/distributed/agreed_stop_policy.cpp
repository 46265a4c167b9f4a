#include "trainhooks/distributed/agreed_stop_policy.h"

#include "trainhooks/distributed/process_group.h"
#include "trainhooks/errors.h"

namespace trainhooks::distributed {

namespace {

class AgreedStopPolicy : public StopPolicy {
 public:
  explicit AgreedStopPolicy(std::shared_ptr<ProcessGroup> group) : group_(std::move(group)) {}
  bool decide(bool local_stop) override { return group_->any(local_stop); }

 private:
  std::shared_ptr<ProcessGroup> group_;
};

}  // namespace

std::shared_ptr<StopPolicy> agreed_stop_policy(std::shared_ptr<ProcessGroup> group) {
  if (!group) throw InvalidArgument("agreed_stop_policy: the process group is null");
  return std::make_shared<AgreedStopPolicy>(std::move(group));
}

}  // namespace trainhooks::distributed
