// Trains y = W·x + b for five steps in a MonitoredTrainingSession, through the installed headers
// and libraries only.
#include <ATen/ATen.h>
#include <trainhooks/graph.h>
#include <trainhooks/optimizers.h>
#include <trainhooks/training_session.h>

#include <cstdio>

namespace th = trainhooks;

int main() {
  th::Graph g;
  auto x = g.placeholder("x", {.dtype = at::kFloat, .shape = {-1}});
  auto y = g.placeholder("y", {.dtype = at::kFloat, .shape = {-1}});
  auto W = g.variable("W", at::zeros({1}));
  auto b = g.variable("b", at::zeros({1}));
  auto y_pred = g.op("y_pred", [=](th::Run& r) { return r[x] * r[W] + r[b]; });
  auto loss = g.op("loss", [=](th::Run& r) { return (r[y_pred] - r[y]).square().mean(); });
  auto train = g.minimize("train", loss, th::sgd(0.01));
  th::MonitoredTrainingSession sess(
      g, {.summaries = {.log_step_count_steps = 0}, .handle_preemption_signals = false});
  const at::Tensor xs = at::arange(4, at::kFloat), ys = 3 * xs + 1;
  for (int i = 0; i < 5 && !sess.should_stop(); ++i) sess.run(train, {{x, xs}, {y, ys}});
  sess.close();
  std::printf("global_step = %lld\n", static_cast<long long>(g.global_step_value()));
  return 0;
}
