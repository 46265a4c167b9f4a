#include "tensor_format.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>

#include <fmt/format.h>

#include <cctype>
#include <cmath>

namespace trainhooks::internal {

std::string format_float(double value, bool single_precision) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string s =
      single_precision ? fmt::format("{}", static_cast<float>(value)) : fmt::format("{}", value);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string format_shape(at::IntArrayRef shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string format_dtype(c10::ScalarType dtype) {
  std::string s = c10::toString(dtype);
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

namespace {

std::string format_scalar(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
    case at::kHalf:
    case at::kBFloat16:
      return format_float(t.item<double>(), true);
    case at::kDouble:
      return format_float(t.item<double>(), false);
    case at::kBool:
      return t.item<bool>() ? "True" : "False";
    default:
      if (t.is_complex()) return fmt::format("{}", t.item<c10::complex<double>>().real());
      return fmt::format("{}", t.item<int64_t>());
  }
}

void format_dim(const at::Tensor& t, bool summarise, std::string& out) {
  if (t.dim() == 0) {
    out += format_scalar(t);
    return;
  }
  out += '[';
  const int64_t n = t.size(0);
  const char* sep = t.dim() > 1 ? ", " : " ";
  if (summarise && n > 6) {
    for (int64_t i = 0; i < 3; ++i) {
      if (i) out += sep;
      format_dim(t[i], summarise, out);
    }
    out += sep;
    out += "...";
    for (int64_t i = n - 3; i < n; ++i) {
      out += sep;
      format_dim(t[i], summarise, out);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      if (i) out += sep;
      format_dim(t[i], summarise, out);
    }
  }
  out += ']';
}

}  // namespace

std::string format_tensor(const at::Tensor& value) {
  if (!value.defined()) return "None";
  at::Tensor t = value.detach().to(at::kCPU);
  if (t.dim() == 0) return format_scalar(t);
  std::string out;
  format_dim(t, t.numel() > 1000, out);
  return out;
}

std::string describe_tensor(const at::Tensor& t) {
  return fmt::format("shape [{}] and dtype {}", fmt::join(t.sizes(), ", "),
                     c10::toString(t.scalar_type()));
}

at::Tensor host_tensor(const at::Tensor& t, bool copy) {
  if (t.is_cpu() && !copy) return t.detach();
  at::NoGradGuard no_grad;  // a copy that records no history and does not require grad
  return t.is_cpu() ? t.clone() : t.cpu();
}

}  // namespace trainhooks::internal
