#include "optimizer_state.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>

#include <fmt/format.h>

#include <functional>
#include <map>
#include <memory>
#include <type_traits>

#include "tensor_format.h"
#include "trainhooks/errors.h"

namespace trainhooks::internal {

namespace {

using torch::optim::Optimizer;
using torch::optim::OptimizerOptions;
using torch::optim::OptimizerParamGroup;
using torch::optim::OptimizerParamState;
using Dict = c10::impl::GenericDict;

Dict string_dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }

std::string impl_key(const at::Tensor& t) { return c10::guts::to_string(t.unsafeGetTensorImpl()); }

[[noreturn]] void unfit(const std::string& what) { throw InvalidArgument(what); }

const c10::IValue& field(const Dict& d, const std::string& key, const std::string& where) {
  auto it = d.find(c10::IValue(key));
  if (it == d.end()) unfit(fmt::format("{} has no '{}'", where, key));
  return it->value();
}

double as_double(const c10::IValue& v, const char* name) {
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  unfit(fmt::format("option '{}' is not a number", name));
}

bool as_bool(const c10::IValue& v, const char* name) {
  if (!v.isBool()) unfit(fmt::format("option '{}' is not a bool", name));
  return v.toBool();
}

template <class Opts>
struct OptionField {
  const char* name;
  std::function<c10::IValue(const Opts&)> get;
  std::function<void(Opts&, const c10::IValue&)> set;  // throws InvalidArgument
};

template <class S>
struct TensorField {
  const char* name;
  std::function<at::Tensor(const S&)> get;
  std::function<void(S&, const at::Tensor&)> set;
  bool required;  // always defined in a state that exists
};

template <class Opts, class Get, class Set>
OptionField<Opts> double_option(const char* name, Get get, Set set) {
  return {name, [get](const Opts& o) { return c10::IValue(get(o)); },
          [name, set](Opts& o, const c10::IValue& v) { set(o, as_double(v, name)); }};
}

template <class Opts, class Get, class Set>
OptionField<Opts> bool_option(const char* name, Get get, Set set) {
  return {name, [get](const Opts& o) { return c10::IValue(get(o)); },
          [name, set](Opts& o, const c10::IValue& v) { set(o, as_bool(v, name)); }};
}

// Adam's and AdamW's (beta1, beta2), as a list of two floats.
template <class Opts>
OptionField<Opts> betas_option() {
  return {"betas",
          [](const Opts& o) {
            return c10::IValue(c10::List<double>({std::get<0>(o.betas()), std::get<1>(o.betas())}));
          },
          [](Opts& o, const c10::IValue& v) {
            if (!v.isDoubleList() || v.toDoubleList().size() != 2)
              unfit("option 'betas' is not a pair of numbers");
            o.betas(std::make_tuple(v.toDoubleList().get(0), v.toDoubleList().get(1)));
          }};
}

// The fields of LibTorch's option and state types, through their TORCH_ARG accessors.
#define TH_DOUBLE(Opts, f) \
  double_option<Opts>(     \
      #f, [](const Opts& o) { return o.f(); }, [](Opts& o, double v) { o.f(v); })
#define TH_BOOL(Opts, f) \
  bool_option<Opts>(     \
      #f, [](const Opts& o) { return o.f(); }, [](Opts& o, bool v) { o.f(v); })
#define TH_TENSOR(S, f, req)                                          \
  TensorField<S> {                                                    \
    .name = #f, .get = [](const S& s) { return s.f(); },              \
    .set = [](S& s, const at::Tensor& t) { s.f(t); }, .required = req \
  }

class Codec {
 public:
  virtual ~Codec() = default;
  virtual const std::string& type() const = 0;
  virtual bool is(const Optimizer& opt) const = 0;
  virtual void encode_options(const OptimizerOptions& options, Dict& out) const = 0;
  // A copy of `base` (of this codec's options type) with the fields of `d`.
  virtual std::unique_ptr<OptimizerOptions> decode_options(const Dict& d,
                                                           const OptimizerOptions* base,
                                                           const std::string& where) const = 0;
  virtual std::optional<Dict> encode_state(const OptimizerParamState& s, bool copy,
                                           size_t& bytes) const = 0;
  virtual std::unique_ptr<OptimizerParamState> decode_state(const Dict& d, const at::Tensor* param,
                                                            const std::string& where) const = 0;
  virtual std::unique_ptr<Optimizer> make(std::vector<OptimizerParamGroup> groups) const = 0;
};

template <class O, class Opts, class S>
class TypedCodec final : public Codec {
 public:
  TypedCodec(std::string type, std::vector<OptionField<Opts>> options,
             std::vector<TensorField<S>> tensors)
      : type_(std::move(type)), options_(std::move(options)), tensors_(std::move(tensors)) {}

  const std::string& type() const override { return type_; }
  bool is(const Optimizer& opt) const override { return dynamic_cast<const O*>(&opt) != nullptr; }

  void encode_options(const OptimizerOptions& options, Dict& out) const override {
    const auto& o = static_cast<const Opts&>(options);
    for (const auto& f : options_) out.insert(std::string(f.name), f.get(o));
  }

  std::unique_ptr<OptimizerOptions> decode_options(const Dict& d, const OptimizerOptions* base,
                                                   const std::string& where) const override {
    const auto* typed = base ? dynamic_cast<const Opts*>(base) : nullptr;
    if (base && !typed)
      unfit(fmt::format("{}: the optimizer's options are not {}'s", where, type_));
    std::unique_ptr<Opts> o = options_like(typed);
    for (const auto& kv : d) {
      if (!kv.key().isString()) unfit(fmt::format("{} has a key that is not a string", where));
      const std::string& key = kv.key().toStringRef();
      if (key == "params") continue;
      const OptionField<Opts>* f = nullptr;
      for (const auto& candidate : options_)
        if (key == candidate.name) f = &candidate;
      if (!f) unfit(fmt::format("{} has an unknown option '{}' for {}", where, key, type_));
      try {
        f->set(*o, kv.value());
      } catch (const InvalidArgument& e) {
        unfit(fmt::format("{}: {}", where, e.what()));
      }
    }
    for (const auto& f : options_)
      if (d.find(c10::IValue(std::string(f.name))) == d.end())
        unfit(fmt::format("{} has no option '{}'", where, f.name));
    return o;
  }

  std::optional<Dict> encode_state(const OptimizerParamState& s, bool copy,
                                   size_t& bytes) const override {
    const auto* p = dynamic_cast<const S*>(&s);
    if (!p) return std::nullopt;
    Dict d = string_dict();
    if constexpr (kHasStep) d.insert(std::string("step"), p->step());
    for (const auto& f : tensors_) {
      at::Tensor t = f.get(*p);
      if (!t.defined()) continue;
      bytes += t.nbytes();
      // On the host, as the variables: a copy when the write happens later.
      d.insert(std::string(f.name), host_tensor(t, copy));
    }
    return d;
  }

  std::unique_ptr<OptimizerParamState> decode_state(const Dict& d, const at::Tensor* param,
                                                    const std::string& where) const override {
    auto s = std::make_unique<S>();
    for (const auto& kv : d) {
      if (!kv.key().isString()) unfit(fmt::format("{} has a key that is not a string", where));
      const std::string& key = kv.key().toStringRef();
      const c10::IValue& v = kv.value();
      if constexpr (kHasStep) {
        if (key == "step") {
          if (!v.isInt() || v.toInt() < 0)
            unfit(fmt::format("{}: 'step' is not a non-negative integer", where));
          s->step(v.toInt());
          continue;
        }
      }
      const TensorField<S>* f = nullptr;
      for (const auto& candidate : tensors_)
        if (key == candidate.name) f = &candidate;
      if (!f) unfit(fmt::format("{} has an unknown entry '{}' for {}", where, key, type_));
      if (!v.isTensor()) unfit(fmt::format("{}: '{}' is not a tensor", where, key));
      at::Tensor t = v.toTensor();
      if (param) {
        if (t.sizes() != param->sizes() || t.scalar_type() != param->scalar_type()) {
          unfit(fmt::format(
              "{}: '{}' has shape [{}] and dtype {}, the parameter shape [{}] and dtype {}", where,
              key, fmt::join(t.sizes(), ", "), c10::toString(t.scalar_type()),
              fmt::join(param->sizes(), ", "), c10::toString(param->scalar_type())));
        }
        t = t.to(param->device());
      }
      f->set(*s, t);
    }
    for (const auto& f : tensors_)
      if (f.required && !f.get(*s).defined()) unfit(fmt::format("{} has no '{}'", where, f.name));
    if constexpr (kHasStep) {
      if (d.find(c10::IValue(std::string("step"))) == d.end())
        unfit(fmt::format("{} has no 'step'", where));
    }
    return s;
  }

  std::unique_ptr<Optimizer> make(std::vector<OptimizerParamGroup> groups) const override {
    const auto* first = groups.empty() ? nullptr : &groups.front().options();
    std::unique_ptr<Opts> defaults =
        options_like(first ? dynamic_cast<const Opts*>(first) : nullptr);
    return std::make_unique<O>(std::move(groups), *defaults);
  }

 private:
  static constexpr bool kHasStep = requires(const S& s) { s.step(); };

  // A copy of `like`, else the defaults (SGDOptions has no default learning rate: 0).
  static std::unique_ptr<Opts> options_like(const Opts* like) {
    if (like) return std::make_unique<Opts>(*like);
    if constexpr (std::is_default_constructible_v<Opts>)
      return std::make_unique<Opts>();
    else
      return std::make_unique<Opts>(0.0);
  }

  std::string type_;
  std::vector<OptionField<Opts>> options_;
  std::vector<TensorField<S>> tensors_;
};

// Adam and AdamW: the same fields in unrelated types.
template <class O, class Opts, class S>
std::unique_ptr<Codec> adam_like_codec(std::string type) {
  return std::make_unique<TypedCodec<O, Opts, S>>(
      std::move(type),
      std::vector<OptionField<Opts>>{TH_DOUBLE(Opts, lr), betas_option<Opts>(),
                                     TH_DOUBLE(Opts, eps), TH_DOUBLE(Opts, weight_decay),
                                     TH_BOOL(Opts, amsgrad)},
      std::vector<TensorField<S>>{TH_TENSOR(S, exp_avg, true), TH_TENSOR(S, exp_avg_sq, true),
                                  TH_TENSOR(S, max_exp_avg_sq, false)});
}

const std::vector<std::unique_ptr<Codec>>& codecs() {
  using namespace torch::optim;
  // LibTorch's options types, not the library's own of the same names (optimizers.h).
  using torch::optim::AdagradOptions, torch::optim::AdamOptions;
  static const auto* all = [] {
    auto* v = new std::vector<std::unique_ptr<Codec>>();
    v->push_back(std::make_unique<TypedCodec<SGD, SGDOptions, SGDParamState>>(
        "sgd",
        std::vector<OptionField<SGDOptions>>{
            TH_DOUBLE(SGDOptions, lr), TH_DOUBLE(SGDOptions, momentum),
            TH_DOUBLE(SGDOptions, dampening), TH_DOUBLE(SGDOptions, weight_decay),
            TH_BOOL(SGDOptions, nesterov)},
        std::vector<TensorField<SGDParamState>>{TH_TENSOR(SGDParamState, momentum_buffer, true)}));
    v->push_back(adam_like_codec<Adam, AdamOptions, AdamParamState>("adam"));
    v->push_back(adam_like_codec<AdamW, AdamWOptions, AdamWParamState>("adamw"));
    v->push_back(std::make_unique<TypedCodec<RMSprop, RMSpropOptions, RMSpropParamState>>(
        "rmsprop",
        std::vector<OptionField<RMSpropOptions>>{
            TH_DOUBLE(RMSpropOptions, lr), TH_DOUBLE(RMSpropOptions, alpha),
            TH_DOUBLE(RMSpropOptions, eps), TH_DOUBLE(RMSpropOptions, weight_decay),
            TH_DOUBLE(RMSpropOptions, momentum), TH_BOOL(RMSpropOptions, centered)},
        std::vector<TensorField<RMSpropParamState>>{
            TH_TENSOR(RMSpropParamState, square_avg, true),
            TH_TENSOR(RMSpropParamState, momentum_buffer, false),
            TH_TENSOR(RMSpropParamState, grad_avg, false)}));
    v->push_back(std::make_unique<TypedCodec<Adagrad, AdagradOptions, AdagradParamState>>(
        "adagrad",
        std::vector<OptionField<AdagradOptions>>{
            TH_DOUBLE(AdagradOptions, lr), TH_DOUBLE(AdagradOptions, lr_decay),
            TH_DOUBLE(AdagradOptions, weight_decay),
            TH_DOUBLE(AdagradOptions, initial_accumulator_value), TH_DOUBLE(AdagradOptions, eps)},
        std::vector<TensorField<AdagradParamState>>{TH_TENSOR(AdagradParamState, sum, true)}));
    return v;
  }();
  return *all;
}

#undef TH_DOUBLE
#undef TH_BOOL
#undef TH_TENSOR

const Codec* codec_of(const Optimizer& opt) {
  for (const auto& c : codecs())
    if (c->is(opt)) return c.get();
  return nullptr;
}

const Codec& codec_named(const std::string& type) {
  for (const auto& c : codecs())
    if (c->type() == type) return *c;
  unfit(fmt::format("unknown optimizer type '{}'", type));
}

Dict top_of(const c10::IValue& encoded) {
  if (!encoded.isGenericDict()) unfit("the optimizer state is not a dict");
  return encoded.toGenericDict();
}

// An encoding read back, checked against `opt` when given.
struct Decoded {
  const Codec* codec = nullptr;
  std::vector<std::unique_ptr<OptimizerOptions>> options;  // per group
  std::vector<size_t> group_sizes;
  std::map<int64_t, std::unique_ptr<OptimizerParamState>> states;  // by parameter index
};

Decoded decode(const c10::IValue& encoded, const Optimizer* opt) {
  Decoded out;
  const Dict top = top_of(encoded);
  const c10::IValue& type = field(top, "type", "the optimizer state");
  if (!type.isString()) unfit("the optimizer state's 'type' is not a string");
  out.codec = &codec_named(type.toStringRef());
  if (opt && !out.codec->is(*opt))
    unfit(fmt::format("the checkpoint holds the state of an optimizer of type '{}'",
                      type.toStringRef()));
  const c10::IValue& groups_v = field(top, "param_groups", "the optimizer state");
  if (!groups_v.isList()) unfit("the optimizer state's 'param_groups' is not a list");
  const auto groups = groups_v.toList();
  if (opt && groups.size() != opt->param_groups().size()) {
    unfit(fmt::format("the checkpoint has {} parameter group(s), the optimizer {}", groups.size(),
                      opt->param_groups().size()));
  }
  std::vector<const at::Tensor*> params;
  int64_t next = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string where = fmt::format("parameter group {}", i);
    const c10::IValue g = groups.get(i);
    if (!g.isGenericDict()) unfit(fmt::format("{} is not a dict", where));
    const Dict gd = g.toGenericDict();
    const c10::IValue& ids = field(gd, "params", where);
    if (!ids.isIntList()) unfit(fmt::format("{}: 'params' is not a list of integers", where));
    const auto list = ids.toIntVector();
    for (int64_t id : list)
      if (id != next++)
        unfit(fmt::format("{}: 'params' does not number the parameters in order", where));
    if (opt) {
      const auto& group = opt->param_groups()[i];
      if (list.size() != group.params().size()) {
        unfit(fmt::format("{} has {} parameter(s) in the checkpoint, {} in the optimizer", where,
                          list.size(), group.params().size()));
      }
      for (const auto& p : group.params()) params.push_back(&p);
    }
    out.options.push_back(
        out.codec->decode_options(gd, opt ? &opt->param_groups()[i].options() : nullptr, where));
    out.group_sizes.push_back(list.size());
  }
  const c10::IValue& state_v = field(top, "state", "the optimizer state");
  if (!state_v.isGenericDict()) unfit("the optimizer state's 'state' is not a dict");
  for (const auto& kv : state_v.toGenericDict()) {
    if (!kv.key().isInt() || kv.key().toInt() < 0 || kv.key().toInt() >= next)
      unfit("the optimizer state has an entry for no parameter");
    const int64_t id = kv.key().toInt();
    const std::string where = fmt::format("the state of parameter {}", id);
    if (!kv.value().isGenericDict()) unfit(fmt::format("{} is not a dict", where));
    out.states.emplace(
        id, out.codec->decode_state(kv.value().toGenericDict(),
                                    opt ? params[static_cast<size_t>(id)] : nullptr, where));
  }
  return out;
}

}  // namespace

std::optional<c10::IValue> encode_optimizer(const Optimizer& opt, bool copy, size_t& bytes) {
  const Codec* codec = codec_of(opt);
  if (!codec) return std::nullopt;
  size_t added = 0;
  Dict top = string_dict();
  top.insert(std::string("type"), codec->type());
  Dict state(c10::IntType::get(), c10::AnyType::get());
  c10::impl::GenericList groups(c10::AnyType::get());
  int64_t index = 0;
  for (const auto& group : opt.param_groups()) {
    Dict g = string_dict();
    codec->encode_options(group.options(), g);
    c10::List<int64_t> ids;
    for (const auto& p : group.params()) {
      auto it = opt.state().find(impl_key(p));
      if (it != opt.state().end()) {
        auto encoded = codec->encode_state(*it->second, copy, added);
        if (!encoded) return std::nullopt;
        state.insert(index, *encoded);
      }
      ids.push_back(index++);
    }
    g.insert(std::string("params"), ids);
    groups.push_back(g);
  }
  top.insert(std::string("state"), state);
  top.insert(std::string("param_groups"), groups);
  bytes += added;
  return c10::IValue(top);
}

void check_encoded_optimizer(const c10::IValue& encoded, const Optimizer& opt) {
  decode(encoded, &opt);
}

void validate_encoded_optimizer(const c10::IValue& encoded) { decode(encoded, nullptr); }

void load_encoded_optimizer(const c10::IValue& encoded, Optimizer& opt) {
  Decoded d = decode(encoded, &opt);
  std::vector<at::Tensor> params;
  for (auto& group : opt.param_groups())
    for (const auto& p : group.params()) params.push_back(p);
  opt.state().clear();
  for (size_t i = 0; i < d.options.size(); ++i)
    opt.param_groups()[i].set_options(std::move(d.options[i]));
  for (auto& [id, s] : d.states)
    opt.state()[impl_key(params[static_cast<size_t>(id)])] = std::move(s);
}

std::string encoded_optimizer_type(const c10::IValue& encoded) {
  if (!encoded.isGenericDict()) return "";
  const Dict top = encoded.toGenericDict();
  auto it = top.find(c10::IValue(std::string("type")));
  return it != top.end() && it->value().isString() ? it->value().toStringRef() : "";
}

std::vector<std::pair<std::string, at::Tensor>> encoded_optimizer_tensors(
    const c10::IValue& encoded) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  if (!encoded.isGenericDict()) return out;
  const Dict top = encoded.toGenericDict();
  auto it = top.find(c10::IValue(std::string("state")));
  if (it == top.end() || !it->value().isGenericDict()) return out;
  std::map<int64_t, Dict> by_index;
  for (const auto& kv : it->value().toGenericDict())
    if (kv.key().isInt() && kv.value().isGenericDict())
      by_index.emplace(kv.key().toInt(), kv.value().toGenericDict());
  for (const auto& [id, d] : by_index)
    for (const auto& kv : d)
      if (kv.key().isString() && kv.value().isTensor())
        out.emplace_back(fmt::format("{}/{}", id, kv.key().toStringRef()), kv.value().toTensor());
  return out;
}

std::string encoded_optimizer_archive(const c10::IValue& encoded) {
  Decoded d = decode(encoded, nullptr);
  // Placeholder parameters: the archive keys the state by parameter order, not by value.
  std::vector<OptimizerParamGroup> groups;
  std::vector<at::Tensor> params;
  for (size_t i = 0; i < d.options.size(); ++i) {
    std::vector<at::Tensor> group_params;
    for (size_t j = 0; j < d.group_sizes[i]; ++j) {
      group_params.push_back(at::zeros({0}));
      params.push_back(group_params.back());
    }
    groups.emplace_back(std::move(group_params), d.options[i]->clone());
  }
  std::unique_ptr<Optimizer> opt = d.codec->make(std::move(groups));
  opt->state().clear();
  for (auto& [id, s] : d.states)
    opt->state()[impl_key(params[static_cast<size_t>(id)])] = std::move(s);
  return optimizer_archive(*opt);
}

std::string optimizer_archive(const torch::optim::Optimizer& opt) {
  torch::serialize::OutputArchive archive;
  opt.save(archive);
  std::string out;
  archive.save_to([&out](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  return out;
}

void load_optimizer_archive(const std::string& archive, torch::optim::Optimizer& opt) {
  torch::serialize::InputArchive in;
  in.load_from(archive.data(), archive.size());
  opt.load(in);
}

void read_optimizer_archive(const std::string& archive) {
  torch::serialize::InputArchive in;
  in.load_from(archive.data(), archive.size());
}

}  // namespace trainhooks::internal
