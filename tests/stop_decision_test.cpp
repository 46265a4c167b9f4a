#include "stop_decision.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "trainhooks/coordinator.h"

namespace th = trainhooks;

namespace stop_decision_test {

// Records what the session hands it and answers as told.
struct ScriptedPolicy : th::StopPolicy {
  bool answer = false;
  std::vector<bool> asked;
  bool decide(bool local_stop) override {
    asked.push_back(local_stop);
    return answer;
  }
};

TEST(StopDecisionTest, AloneTheReasonsAreTheDecisionAndItStaysUntilReset) {
  th::Coordinator coord;
  th::internal::StopDecision stop(nullptr);
  stop.decide(false);
  EXPECT_FALSE(stop.decided());
  EXPECT_FALSE(stop.should_stop(coord));
  EXPECT_FALSE(stop.refuses_run());

  stop.request();
  EXPECT_TRUE(stop.refuses_run());  // before the decision: a hook's request refuses the next run
  stop.decide(false);
  EXPECT_TRUE(stop.decided());
  EXPECT_TRUE(stop.stopping());
  stop.decide(false);  // a later run without a reason does not undo it
  EXPECT_TRUE(stop.should_stop(coord));

  stop.reset();
  EXPECT_FALSE(stop.decided());
  EXPECT_FALSE(stop.refuses_run());
  stop.reach_end_of_input();
  stop.decide(false);
  EXPECT_TRUE(stop.decided());
}

TEST(StopDecisionTest, AloneACoordinatorStopIsSeenBetweenRuns) {
  // TF's should_stop() reads the Coordinator itself: another thread's stop is seen at once.
  th::Coordinator coord;
  th::internal::StopDecision stop(nullptr);
  coord.request_stop();
  EXPECT_TRUE(stop.should_stop(coord));
  EXPECT_FALSE(stop.decided());
  EXPECT_FALSE(stop.refuses_run());  // a run is not refused: TF's hooked session runs it
}

TEST(StopDecisionTest, WithAPolicyThePolicyDecidesOncePerDecide) {
  th::Coordinator coord;
  auto policy = std::make_shared<ScriptedPolicy>();
  th::internal::StopDecision stop(policy);
  stop.decide(true);  // the Coordinator was told to stop
  stop.decide(false);
  EXPECT_EQ(policy->asked, (std::vector<bool>{true, false}));
  // The peers did not agree: no stop, and the Coordinator alone does not stop this process.
  coord.request_stop();
  EXPECT_FALSE(stop.should_stop(coord));
  EXPECT_FALSE(stop.refuses_run());

  policy->answer = true;  // a peer stopped
  stop.decide(false);
  EXPECT_TRUE(stop.should_stop(coord));
  // An agreed stop is final: a run would wait for peers that stopped.
  EXPECT_TRUE(stop.refuses_run());
}

}  // namespace stop_decision_test
