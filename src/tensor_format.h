// Text of tensors in log lines and messages, as a TF user sees numpy values, shapes and dtypes
// printed.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace trainhooks::internal {

// Python's repr of a float: shortest round-trip digits, ".0" on integral values, nan, inf.
std::string format_float(double value, bool single_precision);
// Scalars as Python prints them; arrays as numpy prints them without padding (`[1.5 2.0]`,
// nested brackets per dimension, `...` after 3 leading and before 3 trailing entries of any
// dimension once the tensor has more than 1000 elements).
std::string format_tensor(const at::Tensor& value);

// "[2, 3]", "[]": a shape in messages.
std::string format_shape(at::IntArrayRef shape);
// "float", "long": a dtype in messages, spelled as numpy does.
std::string format_dtype(c10::ScalarType dtype);

// "shape [2, 3] and dtype Float": a tensor in checkpoint messages, dtype as LibTorch spells it.
std::string describe_tensor(const at::Tensor& t);

// `t` on the host without autograd: itself (detached) when on the CPU and not `copy`, else a copy.
at::Tensor host_tensor(const at::Tensor& t, bool copy);

}  // namespace trainhooks::internal
