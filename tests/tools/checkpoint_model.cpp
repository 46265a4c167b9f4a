#include "tools/checkpoint_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>

#include "trainhooks/optimizers.h"
#include "trainhooks/session.h"

namespace trainhooks::testing {

std::unique_ptr<CheckpointModel> CheckpointModel::make() {
  torch::manual_seed(0);
  auto m = std::make_unique<CheckpointModel>();
  const at::Tensor xs = torch::randn({kExamples, 4});
  const at::Tensor ys = xs.matmul(torch::tensor({1.5f, -2.0f, 0.5f, 3.0f})).unsqueeze(1) +
                        0.1 * torch::randn({kExamples, 1});
  m->batch = m->g.input("data", tensor_source({xs, ys}, {"x", "y"}),
                        {.batch_size = kBatchSize, .shuffle = true, .seed = 7, .num_epochs = 0});

  torch::nn::Sequential net(torch::nn::Linear(4, 16), torch::nn::ReLU(), torch::nn::Dropout(0.25),
                            torch::nn::Linear(16, 1));
  m->g.add_module("net", net);
  const Node x = m->batch[0], y = m->batch[1];
  const Node pred = m->g.op("pred", [net, x](Run& r) mutable { return net->forward(r[x]); });
  m->loss = m->g.op("loss", [pred, y](Run& r) { return (r[pred] - r[y]).square().mean(); });
  m->train = m->g.minimize("train", m->loss, adam(1e-2));
  return m;
}

std::map<std::string, at::Tensor> training_state(Graph& g, Node train) {
  std::map<std::string, at::Tensor> out;
  for (Node v : g.variables()) out["var/" + g.name(v)] = g.variable_value(v).detach().clone();
  auto& opt = g.optimizer(train);
  int index = 0;
  for (const auto& group : opt.param_groups()) {
    for (const auto& p : group.params()) {
      const std::string prefix = "adam/" + std::to_string(index++) + "/";
      auto it = opt.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
      if (it == opt.state().end()) continue;  // no step taken yet
      const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
      out[prefix + "step"] = torch::tensor(s.step(), torch::kLong);
      out[prefix + "exp_avg"] = s.exp_avg().clone();
      out[prefix + "exp_avg_sq"] = s.exp_avg_sq().clone();
      if (s.max_exp_avg_sq().defined()) out[prefix + "max_exp_avg_sq"] = s.max_exp_avg_sq().clone();
    }
  }
  out["global_step"] = torch::tensor(g.global_step_value(), torch::kLong);
  for (Node in : g.inputs()) {
    const InputPosition p = g.input_position(in);
    out["input/position"] = torch::tensor({p.epoch, p.offset}, torch::kLong);
  }
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  out["rng/cpu"] = gen.get_state();
  return out;
}

void save_training_state(Graph& g, Node train, const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, t] : training_state(g, train)) dict.insert(name, t);
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

std::map<std::string, at::Tensor> load_training_state(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::map<std::string, at::Tensor> out;
  for (const auto& kv : torch::pickle_load(bytes).toGenericDict()) {
    out.emplace(kv.key().toStringRef(), kv.value().toTensor());
  }
  return out;
}

std::string state_differences(const std::map<std::string, at::Tensor>& a,
                              const std::map<std::string, at::Tensor>& b) {
  std::string out;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end()) {
      out += name + ": only in the first\n";
    } else if (t.scalar_type() != it->second.scalar_type() ||
               !t.sizes().equals(it->second.sizes()) || !torch::equal(t, it->second)) {
      out += name + ": differs\n";
    }
  }
  for (const auto& [name, t] : b) {
    if (!a.count(name)) out += name + ": only in the second\n";
  }
  return out;
}

CpuRngGuard::CpuRngGuard() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  state_ = gen.get_state();
}

CpuRngGuard::~CpuRngGuard() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state_);
}

}  // namespace trainhooks::testing
