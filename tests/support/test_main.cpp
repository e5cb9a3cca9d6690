// main() of every GoogleTest executable of the project (in place of gtest_main), with what grading needs.
//
// A graded test earns points only when it ran to its own end, which nothing the code under test prints can
// prove: a test that stops at std::exit(0) looks, to CTest, like a pass, and a printed "[  SKIPPED ]" like a
// skip. So when ./lab check or ./lab grade runs a graded test (grader/run_tests.py, one process per
// test, each in its own sandbox), it hands the process a socket and a random token made for that process
// alone, in SPEEDLABS_GRADE_FD and SPEEDLABS_GRADE_TOKEN. This main takes both out of the environment before
// any test runs (the token's characters are overwritten where /proc/self/environ shows them too) and
// sends, over the socket:
//   start                                  when the test starts (no token: nothing to read there),
//   end <token> passed|failed|skipped      when GoogleTest has finished it (its last assertion ran), or
//   signal <token> <number>                when the process crashes during it (SIGSEGV, SIGABRT, ...),
// and, with the end line in one write, the share of its points a speed test (tests/support/speed.h) earned:
//   score <token> <0..1>|undecided         from the test's GoogleTest property "speedlabs_speed_score", which
//                                          the test sets after its measurement (what the code under test
//                                          prints never counts, and a property it set is overwritten).
// A socket cannot be opened again through /proc/self/fd, and what this end sends cannot be read from it:
// the code under test cannot read these lines. The grader keeps only the first end line carrying the
// token and counts a test only by it: no line means the process left the test early (std::exit, _exit, a
// crash, a timeout), and a skip counts only as GoogleTest itself recorded it (GTEST_SKIP(): no GPU here).
// This is a speed bump, not a wall: code in the same process can read its memory (docs/grading.md).
//
// Without those variables (./lab test) nothing is sent. Either way, a run whose tests were all skipped
// exits with 77, which CTest reports as skipped (SKIP_RETURN_CODE).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::string grade_token;
int grade_fd = -1;     // the socket to the grader
bool in_test = false;  // a test is running: the signal handler reports it
char signal_line[128];
size_t signal_prefix_length = 0;

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written <= 0) return;
    data += written;
    size -= static_cast<size_t>(written);
  }
}

void on_crash(int number) {
  // Async-signal-safe only: the line was prepared when the test started.
  if (grade_fd >= 0 && in_test) {
    char digits[8];
    int n = 0, value = number;
    do {
      digits[n++] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value > 0 && n < 7);
    size_t length = signal_prefix_length;
    while (n > 0) signal_line[length++] = digits[--n];
    signal_line[length++] = '\n';
    write_all(grade_fd, signal_line, length);
  }
  ::signal(number, SIG_DFL);
  ::raise(number);
}

void install_crash_handlers() {
  // Its own stack, so that a stack overflow in the code under test is still reported.
  static char alternate_stack[64 * 1024];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof alternate_stack;
  ::sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = on_crash;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  ::sigemptyset(&action.sa_mask);
  for (const int number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS})
    ::sigaction(number, &action, nullptr);
}

class GradeRecorder : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override {
    in_test = true;
    write_all(grade_fd, "start\n", 6);
  }

  void OnTestEnd(const ::testing::TestInfo& test) override {
    const auto* result = test.result();
    const char* verdict = result->Skipped() ? "skipped" : result->Failed() ? "failed" : "passed";
    std::string end = "end " + grade_token + " " + verdict + "\n";
    for (int i = 0; i < result->test_property_count(); ++i) {
      const auto& property = result->GetTestProperty(i);
      const std::string value = property.value();
      const bool word = !value.empty() && value.find_first_of(" \t\r\n") == std::string::npos;
      if (std::string(property.key()) == "speedlabs_speed_score" && word) {
        end = "score " + grade_token + " " + value + "\n" + end;
      }
    }
    in_test = false;
    write_all(grade_fd, end.data(), end.size());
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* fd = std::getenv("SPEEDLABS_GRADE_FD");
  char* token = std::getenv("SPEEDLABS_GRADE_TOKEN");
  if (fd != nullptr && token != nullptr && *fd != '\0' && *token != '\0') {
    grade_fd = std::atoi(fd);
    grade_token = token;
    std::memset(token, 'x', std::strlen(token));  // the environment block /proc/self/environ shows
    ::unsetenv("SPEEDLABS_GRADE_FD");
    ::unsetenv("SPEEDLABS_GRADE_TOKEN");
    ::fcntl(grade_fd, F_SETFD, FD_CLOEXEC);  // no program this test starts inherits it
    const std::string prefix = "signal " + grade_token + " ";
    if (prefix.size() + 10 < sizeof signal_line) {
      std::memcpy(signal_line, prefix.data(), prefix.size());
      signal_prefix_length = prefix.size();
      install_crash_handlers();
      ::testing::UnitTest::GetInstance()->listeners().Append(new GradeRecorder);
    }
  }
  const int code = RUN_ALL_TESTS();
  const auto* unit = ::testing::UnitTest::GetInstance();
  if (code == 0 && unit->test_to_run_count() > 0 && unit->skipped_test_count() == unit->test_to_run_count()) return 77;
  return code;
}
