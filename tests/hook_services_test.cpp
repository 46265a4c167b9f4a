// HookServices: what the hooks of one session share (hook_services.h), reached as services().
#include "trainhooks/hook_services.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/optim/optimizer.h>

#include <limits>
#include <memory>
#include <optional>

#include "test_util.h"
#include "trainhooks/errors.h"
#include "trainhooks/graph.h"
#include "trainhooks/hook.h"
#include "trainhooks/hooks/learning_rate_schedule_hook.h"
#include "trainhooks/latest_metrics.h"
#include "trainhooks/learning_rate_schedule.h"
#include "trainhooks/monitored_session.h"

namespace th = trainhooks;

namespace hook_services_test {

// A hook of one's own that publishes a metric and remembers the services it was given.
struct Publisher : th::SessionRunHook {
  th::HookServices* seen = nullptr;
  void begin() override { seen = &services(); }
  void after_run(th::SessionRunContext& ctx, const th::SessionRunValues&) override {
    services().metrics().publish("val/f1", 0.5, ctx.session().global_step(), 0);
  }
  th::HookServices& get() { return services(); }
};

// Sets a learning-rate scale, as a plateau hook would.
struct Scaler : th::SessionRunHook {
  th::Node train_op;
  double scale;
  Scaler(th::Node t, double s) : train_op(t), scale(s) {}
  void begin() override { services().set_learning_rate_scale(train_op, scale); }
};

double rate(th::testing::TinyModel& m) {
  return m.g.optimizer(m.train).param_groups()[0].options().get_lr();
}

TEST(HookServicesTest, EveryHookOfASessionSharesOneAndTheNextSessionGetsAFreshOne) {
  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  auto a = std::make_shared<Publisher>();
  auto b = std::make_shared<Publisher>();
  auto sess = th::testing::chief_session(m.g, {a, b}, fe.env());
  EXPECT_EQ(a->seen, b->seen);
  EXPECT_EQ(a->seen, &sess->services());
  sess->run(m.train, m.feed());
  // The metrics are the graph's: the program reads them after training.
  EXPECT_EQ(th::latest_metrics(m.g).latest("val/f1")->step, 1);
  EXPECT_EQ(&sess->services().metrics(), &th::latest_metrics(m.g));
  a->get().set_stop_at_step(7);
  sess->close();

  auto again = th::testing::chief_session(m.g, {a}, fe.env());
  EXPECT_EQ(a->seen, &again->services());
  EXPECT_EQ(again->services().stop_at_step(), std::nullopt);  // nothing left over
  EXPECT_EQ(again->services().metrics().latest("val/f1")->step, 1);
}

TEST(HookServicesTest, AHookNotInASessionHasNoServices) {
  Publisher p;
  EXPECT_EQ(th::testing::error_message<th::FailedPreconditionError>([&] { p.get(); }),
            "This hook is not attached to a session: services() are available from begin() on");
}

TEST(HookServicesTest, TheLearningRateScaleIsOneUntilSetAndNeverNegativeOrInfinite) {
  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  auto p = std::make_shared<Publisher>();
  auto sess = th::testing::chief_session(m.g, {p}, fe.env());
  th::HookServices& s = p->get();
  EXPECT_EQ(s.learning_rate_scale(m.train), 1.0);
  s.set_learning_rate_scale(m.train, 0.25);
  EXPECT_EQ(s.learning_rate_scale(m.train), 0.25);
  EXPECT_EQ(th::testing::error_message<th::InvalidArgument>(
                [&] { s.set_learning_rate_scale(m.train, -1); }),
            "HookServices: the learning-rate scale of 'train' must be finite and non-negative, "
            "got -1");
  EXPECT_THROW(s.set_learning_rate_scale(m.train, std::numeric_limits<double>::infinity()),
               th::InvalidArgument);
}

// The schedule hook applies the scale of its own session only: a scale set in an earlier session
// (by a plateau hook, say) does not lower the rate of a later one without it.
TEST(HookServicesTest, AScaleOfAnEarlierSessionDoesNotCarryOver) {
  th::testing::FakeEnv fe;
  th::testing::TinyModel m;
  auto schedule = std::make_shared<th::LearningRateScheduleHook>(m.train, th::constant(0.1));
  auto sess =
      th::testing::chief_session(m.g, {std::make_shared<Scaler>(m.train, 0.5), schedule}, fe.env());
  sess->run(m.train, m.feed());
  EXPECT_DOUBLE_EQ(rate(m), 0.05);
  sess->close();
  auto again = th::testing::chief_session(m.g, {schedule}, fe.env());
  again->run(m.train, m.feed());
  EXPECT_DOUBLE_EQ(rate(m), 0.1);
}

}  // namespace hook_services_test
