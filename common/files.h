/// @file files.h
/// @brief Writing result files so that an interrupted run never leaves half a file behind.
#pragma once
#include <sys/types.h>

#include <string>
#include <string_view>

namespace speedlabs {

/// The whole content of the file at @p path, byte for byte; throws RuntimeFailure naming it when it
/// cannot be read or is a folder.
/// @param path  the file
std::string read_file(const std::string& path);

/// read_file() for a file the user named on the command line: a folder, a missing or an unreadable
/// file is their mistake, so it throws UsageError (exit 2) instead.
/// @param path  the file
std::string read_user_file(const std::string& path);

/// "" when @p path is absent or a regular file (the only things an atomic rename may replace); else what it
/// is, for a message: "a folder", "a symbolic link", "a FIFO", "a device", "not a regular file".
std::string not_a_regular_file(const std::string& path);

/// Throws UsageError unless a file can be created at @p path (checked before a long run, not after):
/// the folder must exist and be writable, and @p path must be absent or a regular file. A folder, a
/// symbolic link, a FIFO or a device is refused, never replaced.
/// @param path  the file a run will write
void require_writable(const std::string& path);

/// Throws UsageError unless @p path is a folder results can be written into (checked before a long run,
/// not after): an existing writable folder, or one that can be created (it is created then).
/// @param path  the folder a run will write into
void require_output_folder(const std::string& path);

/// True for "-" and "/dev/stdout": results asked for there are printed as a stream, not written atomically.
/// @param path  an output path as given on the command line
bool is_stream_path(const std::string& path);

/// Writes @p bytes to @p path through a temporary file in the same folder and a rename, so a reader
/// sees the old file or the whole new one. The temporary name is unique per process and call, so
/// parallel writers of the same path (tests run in parallel) never mix their bytes.
/// @param path   the destination
/// @param bytes  the whole content (text or binary)
/// @return false when the file could not be written, or @p path is something other than a regular file
///         (nothing is left behind then, and nothing is replaced)
bool try_write_file_atomically(const std::string& path, std::string_view bytes);

/// try_write_file_atomically(), throwing RuntimeFailure naming the file when it fails.
/// @param path   the destination
/// @param bytes  the whole content
void write_file_atomically(const std::string& path, std::string_view bytes);

/// A CSV file a long run appends to, one line per finished step, so a killed or interrupted run keeps every
/// step it finished. The file is made under a temporary name of this run, with its header, and renamed into
/// place at once; each line is then appended in one checked write, so a line is never half there. The run
/// holds an exclusive lock (flock) on its file for its whole life: a second run given the same path is
/// refused with UsageError (exit 2) before it replaces anything, so two runs never both claim the file. A
/// failed write (a full disk) throws RuntimeFailure (exit 3) saying what the file keeps: the file cut back
/// to its last whole line, or, when the header itself could not be written, the path as it was and no
/// temporary file left behind.
class CsvLog {
 public:
  /// @param path    the CSV file ("" = no CSV: add() does nothing)
  /// @param header  its first line (without the newline)
  CsvLog(std::string path, const std::string& header);
  ~CsvLog();
  CsvLog(const CsvLog&) = delete;
  CsvLog& operator=(const CsvLog&) = delete;
  /// Appends one line (without its newline).
  void add(const std::string& line);

 private:
  // Appends @p line and its newline in one write; "" when it went in whole, else why not.
  std::string write_line(const std::string& line);
  // Renames the header-only @p temporary onto the path, or throws UsageError when another run holds it.
  void replace_unless_another_run_holds(const std::string& temporary);

  std::string path_;
  int fd_ = -1;     // the file this run writes (and holds locked)
  off_t size_ = 0;  // bytes of whole lines written so far
  int lines_ = 0;   // lines written after the header
};

/// Bytes in a temporary file that loses its name as soon as it is made: a child reads it through path()
/// (/dev/fd/N, inherited), and a SIGKILLed run leaves nothing in the temp folder. RuntimeFailure when it
/// cannot be made or written.
class UnnamedFile {
 public:
  /// @param bytes what the file holds
  /// @param stem  the temporary name's start, e.g. "speedlabs-lab06"
  UnnamedFile(const std::string& bytes, const std::string& stem);
  ~UnnamedFile();
  UnnamedFile(const UnnamedFile&) = delete;
  UnnamedFile& operator=(const UnnamedFile&) = delete;
  /// The name a child opens it by.
  std::string path() const;

 private:
  int fd_ = -1;
};

}  // namespace speedlabs
