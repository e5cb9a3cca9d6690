/// @file common/tensor_file.h
/// @brief Named tensors and the small binary file that carries them to reference/gpt_reference.py and back:
/// a model's weights without the model (no nn modules needed to read or write them).
#pragma once
#include <torch/types.h>

#include <string>
#include <utility>
#include <vector>

namespace speedlabs::gpt {

/// Named tensors, in order.
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// Writes named tensors to a small binary file that reference/gpt_reference.py reads back.
///
/// Format, version 1, all integers little-endian:
///   magic "SPDLTNSR" (8 bytes), uint32 version (1), uint32 count, then per tensor:
///   uint32 name length, name (UTF-8), uint8 dtype (0 float32, 1 int64), uint32 ndim,
///   int64 sizes[ndim], then the elements in row-major order.
/// Tensors are copied to the CPU and made contiguous first; other dtypes throw UsageError.
/// @param path    the file to write (through a temporary file and a rename)
/// @param tensors the tensors and their names
void write_tensor_file(const std::string& path, const NamedTensors& tensors);

/// The bytes write_tensor_file() writes, for a caller that writes them elsewhere (an unnamed file).
/// @param tensors the tensors and their names
std::string encode_tensor_file(const NamedTensors& tensors);

/// Reads a file written by write_tensor_file(); RuntimeFailure when it is malformed or of another version.
/// @param path the file to read
NamedTensors read_tensor_file(const std::string& path);

}  // namespace speedlabs::gpt
