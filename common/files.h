/// @file files.h
/// @brief Writing result files so that an interrupted run never leaves half a file behind.
#pragma once
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

}  // namespace speedlabs
