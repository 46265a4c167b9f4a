// Helpers for the distributed tests whose ranks are threads of the test (fake_process_group.h):
// a linear model y = x·w + b, rank r training on examples of its own (its shard), so that without
// averaging the ranks would drift apart; and what a rank threw, as text.
#pragma once

#include <ATen/ATen.h>

#include <exception>
#include <string>

#include "trainhooks/graph.h"
#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"

namespace trainhooks::testing {

struct LinearModel {
  Node w, b, loss, train_op;
};

inline LinearModel build_linear_model(Graph& g, int rank, MinimizeOptions minimize = {}) {
  // No RNG: the ranks build their graphs at once, on threads that would share its state.
  const at::Tensor x = at::sin(at::arange(24, at::kFloat) * (1.0 + rank)).reshape({8, 3});
  const at::Tensor y = at::matmul(x, at::tensor({1.f, -2.f, 3.f}).view({3, 1})) + 0.5f;
  LinearModel m;
  m.w = g.variable("w", at::zeros({3, 1}));
  m.b = g.variable("b", at::zeros({1}));
  m.loss = g.op("loss", [x, y, w = m.w, b = m.b](Run& r) {
    return at::mse_loss(at::matmul(x, r[w]) + r[b], y);
  });
  g.global_step();
  m.train_op = g.minimize("train_op", m.loss, sgd(0.1), std::move(minimize));
  return m;
}

// The message of what a rank threw (run_ranks); "" when it threw nothing.
inline std::string error_text(const std::exception_ptr& error) {
  if (!error) return "";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace trainhooks::testing
