#include "common/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.h"

namespace speedlabs {

namespace {

// A name beside @p path unique to this process and call: parallel writers of one path never share one.
std::string temporary_name_for(const std::string& path) {
  static std::atomic<int> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

// True when @p path names the open file @p fd now.
bool path_names_open_file(const std::string& path, int fd) {
  struct stat at_path {};
  struct stat open_file {};
  return ::stat(path.c_str(), &at_path) == 0 && ::fstat(fd, &open_file) == 0 && at_path.st_dev == open_file.st_dev &&
         at_path.st_ino == open_file.st_ino;
}

}  // namespace

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
    throw UsageError("'" + path + "' is " + what +
                     ": results only replace a regular file (give a file path, or - for standard output)");
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
    throw UsageError("cannot write into '" + path +
                     "': " + (error ? error.message() : std::string("it is a file, not a folder")));
  }
  if (::access(path.c_str(), W_OK) != 0)
    throw UsageError("cannot write into '" + path + "': the folder is not writable");
}

bool try_write_file_atomically(const std::string& path, std::string_view bytes) {
  if (!not_a_regular_file(path).empty()) return false;  // never turn a device, FIFO or link into a file
  const std::string temporary = temporary_name_for(path);
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

CsvLog::CsvLog(std::string path, const std::string& header) : path_(std::move(path)) {
  if (path_.empty()) return;
  const std::string temporary = temporary_name_for(path_);
  fd_ = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw RuntimeFailure("cannot write '" + temporary + "': " + std::strerror(errno));
  try {
    ::flock(fd_, LOCK_EX);  // this run's own new file: no one else holds it
    if (const std::string why = write_line(header); !why.empty()) {
      throw RuntimeFailure("cannot write '" + path_ + "' (" + why + "): nothing was written, and '" + path_ +
                           "' is as it was");
    }
    replace_unless_another_run_holds(temporary);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    std::remove(temporary.c_str());  // every failure leaves the folder as it was
    throw;
  }
}

CsvLog::~CsvLog() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

void CsvLog::add(const std::string& line) {
  if (fd_ < 0) return;
  const std::string why = write_line(line);
  if (why.empty()) {
    ++lines_;
    return;
  }
  const bool cut = ::ftruncate(fd_, size_) == 0;  // a partial line off: the file ends with a whole line
  throw RuntimeFailure("writing '" + path_ + "' failed (" + why + "); " +
                       (cut ? "it keeps its header and the " + std::to_string(lines_) + " line(s) written before"
                            : "its last line may be partial"));
}

std::string CsvLog::write_line(const std::string& line) {
  const std::string bytes = line + "\n";
  errno = 0;
  if (::write(fd_, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    return errno != 0 ? std::strerror(errno) : "a short write";
  }
  size_ += static_cast<off_t>(bytes.size());
  return "";
}

void CsvLog::replace_unless_another_run_holds(const std::string& temporary) {
  // The file now at the path stays locked by this run until the rename. A lock held by another run, or a
  // file replaced between the open and the lock (by the run that held it), means another run writes there.
  const int current = ::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  const bool held = current >= 0 && ((::flock(current, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) ||
                                     !path_names_open_file(path_, current));
  const bool renamed = !held && std::rename(temporary.c_str(), path_.c_str()) == 0;
  const std::string reason = std::strerror(errno);
  if (current >= 0) ::close(current);
  if (held) {
    throw UsageError("another run is writing '" + path_ + "' (it holds the file until it ends): give this run " +
                     "another path");
  }
  if (!renamed) throw RuntimeFailure("cannot write '" + path_ + "': " + reason + "; nothing was written");
}

UnnamedFile::UnnamedFile(const std::string& bytes, const std::string& stem) {
  std::string path = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
  fd_ = mkstemp(path.data());  // not close-on-exec: a child inherits it
  if (fd_ < 0) throw RuntimeFailure("cannot create a temporary file in " + path + ": " + std::strerror(errno));
  ::unlink(path.c_str());
  for (size_t written = 0; written < bytes.size();) {
    const ssize_t n = ::write(fd_, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd_);
      throw RuntimeFailure("cannot write a temporary file: " + why);
    }
    written += static_cast<size_t>(n);
  }
}

UnnamedFile::~UnnamedFile() { ::close(fd_); }

std::string UnnamedFile::path() const { return "/dev/fd/" + std::to_string(fd_); }

}  // namespace speedlabs
