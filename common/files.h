/// @file files.h
/// @brief Writing result files so that an interrupted run never leaves half a file behind.
#pragma once
#include <string>
#include <string_view>

namespace speedlabs {

/// The whole content of the file at @p path, byte for byte; throws RuntimeFailure naming it when it
/// cannot be read.
/// @param path  the file
std::string read_file(const std::string& path);

/// Throws UsageError unless a file can be created at @p path (checked before a long run, not after).
/// @param path  the file a run will write
void require_writable(const std::string& path);

/// Writes @p bytes to @p path through a temporary file in the same folder and a rename, so a reader
/// sees the old file or the whole new one. The temporary name is unique per process and call, so
/// parallel writers of the same path (tests run in parallel) never mix their bytes.
/// @param path   the destination
/// @param bytes  the whole content (text or binary)
/// @return false when the file could not be written (nothing is left behind then)
bool try_write_file_atomically(const std::string& path, std::string_view bytes);

/// try_write_file_atomically(), throwing RuntimeFailure naming the file when it fails.
/// @param path   the destination
/// @param bytes  the whole content
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace speedlabs
