#include "common/files.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.h"

namespace speedlabs {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeFailure("could not read '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void require_writable(const std::string& path) {
  const std::string probe = path + ".probe." + std::to_string(::getpid());
  {
    std::ofstream out(probe);
    if (!out) throw UsageError("cannot write '" + path + "': the folder does not exist or is not writable");
  }
  std::remove(probe.c_str());
}

bool try_write_file_atomically(const std::string& path, std::string_view bytes) {
  static std::atomic<int> counter{0};
  const std::string temporary = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      return false;
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) std::remove(temporary.c_str());
  return !error;
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  if (!try_write_file_atomically(path, bytes)) throw RuntimeFailure("could not write '" + path + "'");
}

}  // namespace speedlabs
