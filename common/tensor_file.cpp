#include "common/tensor_file.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "common/errors.h"
#include "common/files.h"

namespace speedlabs::gpt {

namespace {

constexpr char kMagic[8] = {'S', 'P', 'D', 'L', 'T', 'N', 'S', 'R'};
constexpr uint32_t kVersion = 1;
enum : uint8_t { kFloat32 = 0, kInt64 = 1 };

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));  // the supported hosts are little-endian
}

class Reader {
 public:
  Reader(std::string bytes, std::string path) : bytes_(std::move(bytes)), path_(std::move(path)) {}
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  const char* take(size_t n) {
    if (n > bytes_.size() - offset_) throw RuntimeFailure("tensor file '" + path_ + "' is truncated");
    const char* p = bytes_.data() + offset_;
    offset_ += n;
    return p;
  }
  bool at_end() const { return offset_ == bytes_.size(); }

 private:
  std::string bytes_;
  std::string path_;
  size_t offset_ = 0;
};

}  // namespace

void write_tensor_file(const std::string& path, const NamedTensors& tensors) {
  write_file_atomically(path, encode_tensor_file(tensors));
}

std::string encode_tensor_file(const NamedTensors& tensors) {
  std::string out(kMagic, sizeof(kMagic));
  put<uint32_t>(out, kVersion);
  put<uint32_t>(out, static_cast<uint32_t>(tensors.size()));
  for (const auto& [name, tensor] : tensors) {
    const auto t = tensor.detach().to(torch::kCPU).contiguous();
    uint8_t code;
    if (t.scalar_type() == torch::kFloat) {
      code = kFloat32;
    } else if (t.scalar_type() == torch::kLong) {
      code = kInt64;
    } else {
      throw UsageError("tensor '" + name + "': only float32 and int64 can be written, not " +
                       std::string(c10::toString(t.scalar_type())));
    }
    put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out += name;
    put<uint8_t>(out, code);
    put<uint32_t>(out, static_cast<uint32_t>(t.dim()));
    for (int64_t size : t.sizes()) put<int64_t>(out, size);
    out.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
  }
  return out;
}

NamedTensors read_tensor_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeFailure("cannot open tensor file '" + path + "'");
  Reader reader(std::string(std::istreambuf_iterator<char>(in), {}), path);
  if (std::memcmp(reader.take(sizeof(kMagic)), kMagic, sizeof(kMagic)) != 0) {
    throw RuntimeFailure("'" + path + "' is not a speedlabs tensor file (bad magic)");
  }
  const auto version = reader.get<uint32_t>();
  if (version != kVersion) {
    throw RuntimeFailure("tensor file '" + path + "' has version " + std::to_string(version) + ", expected " +
                         std::to_string(kVersion));
  }
  const auto count = reader.get<uint32_t>();
  NamedTensors tensors;
  for (uint32_t i = 0; i < count; ++i) {
    const auto name_length = reader.get<uint32_t>();
    std::string name(reader.take(name_length), name_length);
    const auto code = reader.get<uint8_t>();
    if (code != kFloat32 && code != kInt64) throw RuntimeFailure("tensor '" + name + "' has an unknown dtype code");
    const auto ndim = reader.get<uint32_t>();
    std::vector<int64_t> sizes(ndim);
    for (auto& size : sizes) {
      size = reader.get<int64_t>();
      if (size < 0) throw RuntimeFailure("tensor '" + name + "' has a negative size");
    }
    auto tensor = torch::empty(sizes, code == kFloat32 ? torch::kFloat : torch::kLong);
    std::memcpy(tensor.data_ptr(), reader.take(tensor.nbytes()), tensor.nbytes());
    tensors.emplace_back(std::move(name), std::move(tensor));
  }
  if (!reader.at_end()) throw RuntimeFailure("tensor file '" + path + "' has bytes after its last tensor");
  return tensors;
}

}  // namespace speedlabs::gpt
