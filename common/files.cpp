#include "common/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.h"

namespace speedlabs {

std::string read_file(const std::string& path) {
  // A folder opens as a stream that reads nothing: without this check it would read as an empty file.
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw RuntimeFailure("'" + path + "' is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeFailure("could not read '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string not_a_regular_file(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return "";
  if (S_ISREG(info.st_mode)) return "";
  if (S_ISDIR(info.st_mode)) return "a folder";
  if (S_ISLNK(info.st_mode)) return "a symbolic link";
  if (S_ISFIFO(info.st_mode)) return "a FIFO";
  if (S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode)) return "a device";
  return "not a regular file";
}

bool is_stream_path(const std::string& path) { return path == "-" || path == "/dev/stdout"; }

std::string read_user_file(const std::string& path) {
  try {
    return read_file(path);
  } catch (const RuntimeFailure& e) {
    throw UsageError(e.what());
  }
}

void require_writable(const std::string& path) {
  if (const auto what = not_a_regular_file(path); !what.empty()) {
    throw UsageError("'" + path + "' is " + what + ": results only replace a regular file (give a file path, or - for standard output)");
  }
  const std::string probe = path + ".probe." + std::to_string(::getpid());
  {
    std::ofstream out(probe);
    if (!out) throw UsageError("cannot write '" + path + "': the folder does not exist or is not writable");
  }
  std::remove(probe.c_str());
}

void require_output_folder(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error || !std::filesystem::is_directory(path, error)) {
    throw UsageError("cannot write into '" + path + "': " +
                     (error ? error.message() : std::string("it is a file, not a folder")));
  }
  if (::access(path.c_str(), W_OK) != 0) throw UsageError("cannot write into '" + path + "': the folder is not writable");
}

bool try_write_file_atomically(const std::string& path, std::string_view bytes) {
  if (!not_a_regular_file(path).empty()) return false;  // never turn a device, FIFO or link into a file
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
