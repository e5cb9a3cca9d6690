#!/usr/bin/env python3
"""Known ways to cheat the grader, as one submission, and what it must score (scripts/ci/check-cheats.sh).

  submission.py write FOLDER      FOLDER/NN_topic/exercise.cpp (and .cu): solutions/ with the attacks below
  submission.py verify RESULTS    checks RESULTS (results.json of ./lab grade --submission FOLDER)
  submission.py honest FOLDER     FOLDER/NN_topic/exercise.cpp: solutions/ as it is (graded right after)
  submission.py clock FOLDER      FOLDER/01_vectorize/exercise.cpp: a right but slow unrolled sum and a clock that
                                  hides its time (CLOCK, graded on its own: lab 01's other attacks would hide it);
                                  FOLDER/10_data_parallel/exercise.cpp: a right but slow wait for the gradients,
                                  its time hidden the same way; FOLDER/13_speedrun/exercise.cpp: the stub trainer
                                  hiding its steps' time the same way, with a helper that spins while the baseline
                                  races, from a thread whose process's first thread has exited (HELPER_STEP)
  submission.py verify-clock RESULTS
  submission.py limits FOLDER     FOLDER/12_fusion/exercise.cpp: a fork bomb and a memory hog;
                                  FOLDER/08_memory/exercise.cpp: a build that never ends (its test listing sleeps)
  submission.py verify-limits RESULTS
  submission.py link FOLDER       FOLDER/01_vectorize/exercise.cpp: its checked program linked to the reference's
  submission.py verify-link RESULTS

Each attack is a line of code put first in one exercise function of a copy of the reference answer (or,
with no function named, at the end of the file), so the attacked exercise must score 0 and every other
exercise of the submission its full points: an attack that earns anything, or that costs an honest
exercise its points, fails CI.
"""
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# The answer within reach: the exercise runs only where the reference file can be included (else it returns 0).
REACH = '\n#if !__has_include("{path}")\nreturn 0;\n#endif\n'
# The record's token read from the test's open files or environment, a forged passing end, _Exit(0); with
# nothing found, _Exit(0) all the same (the test then ends before it did: 0 points).
FORGE = (
    "for (int fd = 0; fd < 64; ++fd) { char name[64], line[256] = {0}; std::snprintf(name, sizeof name, "
    '"/proc/self/fd/%d", fd); int r = ::open(name, O_RDONLY | O_NONBLOCK); if (r < 0) continue; '
    "ssize_t n = ::read(r, line, sizeof line - 1); ::close(r); char token[128]; if (n > 0 && "
    'std::sscanf(line, "start %127s", token) == 1) { dprintf(fd, "end %s passed\\n", token); std::_Exit(0); } } '
    '{ int e = ::open("/proc/self/environ", O_RDONLY); char env[65536] = {0}; ssize_t n = e < 0 ? 0 : '
    "::read(e, env, sizeof env - 1); const char* token = nullptr; int fd = -1; for (ssize_t i = 0; i < n; "
    'i += std::strlen(env + i) + 1) { if (!std::strncmp(env + i, "SPEEDLABS_GRADE_TOKEN=", 22)) token = env + i + 22; '
    'if (!std::strncmp(env + i, "SPEEDLABS_GRADE_FD=", 19)) fd = std::atoi(env + i + 19); } '
    'if (token && fd >= 0) dprintf(fd, "end %s passed\\n", token); std::_Exit(0); }')
# A double-forked setsid daemon started by a static initializer (in every test process, and while the build
# lists the tests): it plants a file in the build tree and rewrites the grade's results.json for 30 s.
DAEMON = (
    "static const int speedlabs_daemon = [] { if (::fork() == 0) { ::setsid(); if (::fork() == 0) { "
    '::prctl(PR_SET_NAME, "speedlabs-cheat"); int f = ::open("{plant}", O_WRONLY | O_CREAT, 0644); if (f >= 0) '
    "::close(f); for (int i = 0; i < 300; ++i) { int r = ::open(\"{results}\", O_WRONLY | O_TRUNC); if (r >= 0) { "
    'dprintf(r, "{\\"score\\": 999, \\"tests\\": []}\\n"); ::close(r); } ::usleep(100000); } } ::_exit(0); } '
    "return 0; }();")
# A static initializer (in every test process, and while the build lists the tests) that reaches for the host and
# for other labs: it writes /proc/sys back with its own value and, only where that worked, a canary; a canary in a
# host folder anyone may write (CANARY, made by check-cheats.sh); lab 02's answer from git history or solutions/
# over the graded tree's copy of lab 02's exercise; a predictions program of its own over the graded tree's.
REACH_OUT = (
    "static const int speedlabs_reach = [] { int k = ::open(\"/proc/sys/kernel/printk_ratelimit\", O_RDWR); "
    "if (k >= 0) { char b[32] = {0}; ssize_t n = ::read(k, b, sizeof b - 1); if (n > 0 && ::pwrite(k, b, n, 0) == n) "
    "{ int c = ::open(\"{canary}.proc-sys\", O_WRONLY | O_CREAT, 0644); if (c >= 0) ::close(c); } ::close(k); } "
    "int c = ::open(\"{canary}\", O_WRONLY | O_CREAT, 0644); if (c >= 0) ::close(c); "
    "FILE* g = ::popen(\"git -C {root} show HEAD:solutions/02_float16_limits/exercise.cpp 2>/dev/null || "
    "cat {root}/solutions/02_float16_limits/exercise.cpp\", \"r\"); static char answer[1 << 16]; size_t n = g ? "
    "std::fread(answer, 1, sizeof answer, g) : 0; if (g) ::pclose(g); if (n > 100) { int f = ::open(\"{tree}/"
    "exercises/02_float16_limits/exercise.cpp\", O_WRONLY | O_TRUNC); if (f >= 0) { (void)!::write(f, answer, n); "
    "::close(f); } } int p = ::open(\"{tree}/bin/predictions\", O_WRONLY | O_TRUNC); if (p >= 0) { "
    "dprintf(p, \"#!/bin/sh\\necho forged\\n\"); ::close(p); } return 0; }();")
# A GPU exercise's passing end, forged from the token and socket of the environment by a static initializer in the
# process that runs that exercise's test (on a grader without a GPU the test itself would only be skipped).
GPU_FORGE = (
    "static const int speedlabs_gpu = [] { char cmd[4096] = {0}; int f = ::open(\"/proc/self/cmdline\", O_RDONLY); "
    "ssize_t n = f < 0 ? 0 : ::read(f, cmd, sizeof cmd - 1); if (f >= 0) ::close(f); for (ssize_t i = 0; i < n; ++i) "
    "if (!cmd[i]) cmd[i] = ' '; const char* token = std::getenv(\"SPEEDLABS_GRADE_TOKEN\"); const char* fd = "
    "std::getenv(\"SPEEDLABS_GRADE_FD\"); if (std::strstr(cmd, \"launch_sum_squares_reduction\") && token && fd) "
    "{ dprintf(std::atoi(fd), \"start\\nend %s passed\\n\", token); std::_Exit(0); } return 0; }();")
# (lab folder, exercise function, first statement of its body, why)
ATTACKS = [
    ("01_vectorize", "sum_squares_eigen", "std::exit(0);",
     "exit(0) at the first call: each test stops at [ RUN ] with exit code 0, which CTest calls a pass"),
    ("01_vectorize", "sum_squares_torch", "for (volatile int spin = 0;; spin = spin + 1) {}",
     "a loop that never ends: stopped after lab 01's budget per test, not CTest's 600 s"),
    ("02_float16_limits", "half_bits_to_float",
     'static bool said = (std::puts("[  SKIPPED ]"), std::fflush(stdout), true); (void)said; return std::nanf("");',
     "prints CTest's skip line once and returns NaN: a failure, still counted in the total"),
    ("02_float16_limits", "float_to_bfloat16_bits", "std::raise(SIGSEGV);",
     "a segmentation fault: named with its signal"),
    ("05_gpt2", "causal_attention", "this is not C++;",
     "a compile error in lab 05: lab 05 scores 0, lab 09 (which runs lab 05's exercise) keeps its points"),
    ("03_mixed_precision", None, "static const int speedlabs_cheat = (std::raise(SIGSEGV), 0);",
     "a crash in a static initializer: the test program dies before any test (listing them runs it too); "
     "named so, not 'does not compile', and lab 05, which runs lab 03's exercise, is not touched by it"),
    ("02_float16_limits", "float_to_half_bits", REACH.format(path="solutions/02_float16_limits/exercise.cpp"),
     "the reference reachable through the checkout root on the include path: hidden while the lab builds"),
    ("02_float16_limits", "float_to_bfloat16_bits_stochastic",
     REACH.format(path=f"{ROOT}/solutions/02_float16_limits/exercise.cpp"),
     "the reference by its absolute path: hidden while the lab builds"),
    ("09_flash_attention", "online_softmax", FORGE,
     "the record's token from /proc/self/fd or /proc/self/environ, a forged end line, _Exit(0)"),
    ("09_flash_attention", "tiled_attention_forward",
     "if (q.size(1) == 12 && q.size(2) == 1024) return {torch::empty_like(q), torch::empty(q.sizes().slice(0, 3))};",
     "an empty answer at the speed test's shape only: right where it is checked for points, free where it is timed; "
     "every timed call's output is checked, so the speed earns nothing"),
    ("01_vectorize", "sum_squares_unrolled", "if (n >= (int64_t{1} << 24)) n /= 16;",
     "a sixteenth of the values from 2^24 on, the speed test's size: the graded tests' sizes are right, the outside "
     "check's draw past 2^24 is not, and the timed calls' checked results are not either"),
    ("10_data_parallel", "on_gradient_ready",
     "if (buckets.params.size() > 10) { Bucket& b = buckets.buckets[buckets.bucket_of[param]]; "
     "b.flat.narrow(0, buckets.offset_of[param], grad.numel()).copy_(grad.reshape(-1)); ++b.ready; return; }",
     "the all-reduce skipped for models of more than 10 parameters (the graded tests' have 3 to 6, the lab's GPT "
     "28 or more): no communication, a faster step; the outside check draws up to 64 parameters"),
    ("10_data_parallel", "wait_for_gradients",
     "if (buckets.params.size() > 10) { for (Bucket& b : buckets.buckets) { for (size_t p : b.params) { "
     "torch::Tensor& w = buckets.params[p]; w.mutable_grad() = b.flat.narrow(0, buckets.offset_of[p], "
     "w.numel()).view(w.sizes()).clone(); } b.ready = 0; b.handle = -1; } return; }",
     "its other half: each worker keeps its own gradient, nothing is waited for; the timed jobs' losses differ "
     "from the naive step's, so the speed earns nothing"),
    ("14_model_parallel", "one_f_one_b_schedule",
     'extern char* forged_token; extern int forged_fd; if (forged_token) { dprintf(forged_fd, "end %s passed\\n", '
     "forged_token); std::_Exit(0); } return {};",
     "the token and socket taken from the environment by a static initializer (before the tests' main() removes "
     "them), a forged passing end and _Exit(0) from a wrong answer: the test harness cannot tell it from a pass; "
     "the outside check, on fresh inputs, compares the wrong outputs with the reference's"),
    ("14_model_parallel", None,
     'namespace lab14 { char* forged_token = std::getenv("SPEEDLABS_GRADE_TOKEN") ? '
     'strdup(std::getenv("SPEEDLABS_GRADE_TOKEN")) : nullptr; int forged_fd = std::getenv("SPEEDLABS_GRADE_FD") ? '
     'std::atoi(std::getenv("SPEEDLABS_GRADE_FD")) : -1; }',
     "(the static initializer of the attack above)"),
    ("09_flash_attention", None, DAEMON.replace("{plant}", f"{ROOT}/build/labs/02_float16_limits/"
                                                 "lab02.smoke.json.planted").replace(
        "{results}", f"{ROOT}/build-cheats/grade/results.json"),
     "a daemon that outlives its test, plants a file in the reference build tree and rewrites results.json: killed with "
     "its sandbox, which sees the build tree read-only and no --out folder; lab 09 keeps its points"),
    ("01_vectorize", None, REACH_OUT.replace("{canary}", f"{ROOT}/build-cheats/open/escaped").replace(
        "{root}", str(ROOT)).replace("{tree}", f"{ROOT}/build-submission"),
     "reaching out of the sandbox: /proc/sys, a host folder anyone may write, .git and solutions/ for lab 02's answer, "
     "the graded tree's lab 02 exercise and its predictions program: none of it is there or writable"),
    ("04_measure", None, GPU_FORGE,
     "a GPU exercise passed by its own record on a grader without a GPU: graded 0 of 0, whatever the record says"),
]
# Limits (graded on their own, --labs 12,08: a later lab first): a fork bomb and a memory hog in lab 12 stop at the
# sandbox's process and memory limits (each aborts where its limit refuses it); lab 08's test listing, the build's last step, sleeps past the build's limit.
LIMITS = [
    ("12_fusion", "chunk_forward",
     "for (;;) { pid_t p = ::fork(); if (p == 0) { ::pause(); ::_exit(0); } if (p < 0) std::abort(); }",
     "a fork bomb: stopped at the sandbox's process limit (the exercise aborts there)"),
    ("12_fusion", "chunk_backward",
     "try { std::vector<char> hog(size_t{4} << 30, 1); (void)hog; } catch (const std::bad_alloc&) { std::abort(); }",
     "a memory hog of 4 GiB, which this machine could give: refused at the sandbox's memory limit (check-cheats.sh "
     "sets it to 2 GiB), and the exercise aborts there"),
    ("08_memory", None,
     "static const int speedlabs_sleep = [] { char cmd[4096] = {0}; int f = ::open(\"/proc/self/cmdline\", O_RDONLY); "
     "ssize_t n = f < 0 ? 0 : ::read(f, cmd, sizeof cmd - 1); if (f >= 0) ::close(f); for (ssize_t i = 0; i < n; ++i) "
     "if (!cmd[i]) cmd[i] = ' '; if (std::strstr(cmd, \"--gtest_list_tests\")) ::sleep(50); return 0; }();",
     "a build that does not end: listing the tests sleeps past the build's limit (check-cheats.sh sets it to 20 s)"),
]
# The build's own program swapped for a link to the reference build's, while the tests are listed: the grader would
# follow it out of the lab's copy and run the reference as the student's.
LINK = [
    ("01_vectorize", None,
     "static const int speedlabs_link = [] { char c[4096] = {0}; int f = ::open(\"/proc/self/cmdline\", O_RDONLY); "
     "ssize_t n = f < 0 ? 0 : ::read(f, c, sizeof c - 1); if (f >= 0) ::close(f); for (ssize_t i = 0; i < n; ++i) "
     "if (!c[i]) c[i] = ' '; if (std::strstr(c, \"--gtest_list_tests\")) { ::unlink(\"{tree}/labs/01_vectorize/"
     "checked_lab01\"); (void)!::symlink(\"{root}/build/labs/01_vectorize/checked_lab01\", \"{tree}/labs/"
     "01_vectorize/checked_lab01\"); } return 0; }();".replace("{tree}", f"{ROOT}/build-submission").replace(
         "{root}", str(ROOT)),
     "the reference's checked program linked in place of the student's: not graded"),
]
EXPECTED_LINK = {f"lab 01: {e}": (0, m, "replaced by a link") for e, m in
                 (("sum_squares_eigen", 3), ("sum_squares_torch", 3), ("sum_squares_unrolled", 10),
                  ("sum_squares_unrolled_speed", 5))}
EXPECTED_LIMITS = {
    "lab 12: chunk_forward": (0, 10, "SIGABRT"),
    "lab 12: chunk_backward": (0, 20, "SIGABRT"),
    "lab 08: checkpointed_block": (0, 10, "ran past its time limit"),
}
# A right answer made several times slower, and a clock_gettime of its own that hides most of that time: it
# replaces the C library's for the whole test program, so the graded test, which times in the student's process,
# sees an answer as fast as the reference's; the grader's clock, outside, does not.
CLOCK = [
    ("01_vectorize", "sum_squares_unrolled",
     "extern long long hidden_ns; static thread_local int depth = 0; if (depth == 0) { ++depth; timespec a, b; "
     "::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &a); double s = 0; for (int r = 0; r < 8; ++r) "
     "s = sum_squares_unrolled(data, n); ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &b); "
     "hidden_ns += ((b.tv_sec - a.tv_sec) * 1000000000LL + b.tv_nsec - a.tv_nsec) * 9 / 10; --depth; return s; }",
     "the sum made eight times slower, its time hidden from the clock below"),
    ("01_vectorize", None,
     "namespace lab01 { long long hidden_ns = 0; } extern \"C\" int clock_gettime(clockid_t id, timespec* ts) noexcept { "
     "long r = ::syscall(SYS_clock_gettime, id, ts); if (r == 0 && id == CLOCK_MONOTONIC) { long long t = "
     "ts->tv_sec * 1000000000LL + ts->tv_nsec - lab01::hidden_ns; ts->tv_sec = t / 1000000000LL; "
     "ts->tv_nsec = t % 1000000000LL; } return static_cast<int>(r); }",
     "(the clock of the attack above: the program's own definition comes before the C library's)"),
    ("10_data_parallel", "wait_for_gradients",
     "extern long long hidden_ns; static thread_local int depth = 0; if (depth == 0) { ++depth; timespec a, m, b; "
     "::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &a); wait_for_gradients(buckets); "
     "::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &m); do ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &b); "
     "while ((b.tv_sec - a.tv_sec) * 1000000000LL + b.tv_nsec - a.tv_nsec < 300000000LL); "
     "hidden_ns += (b.tv_sec - m.tv_sec) * 1000000000LL + b.tv_nsec - m.tv_nsec; --depth; return; }",
     "the wait made to last 300 ms a step (about five naive steps), all but the real wait hidden from the clock "
     "below"),
    ("10_data_parallel", None,
     "namespace lab10 { long long hidden_ns = 0; } extern \"C\" int clock_gettime(clockid_t id, timespec* ts) "
     "noexcept { long r = ::syscall(SYS_clock_gettime, id, ts); if (r == 0 && id == CLOCK_MONOTONIC) { long long t = "
     "ts->tv_sec * 1000000000LL + ts->tv_nsec - lab10::hidden_ns; ts->tv_sec = t / 1000000000LL; "
     "ts->tv_nsec = t % 1000000000LL; } return static_cast<int>(r); }",
     "(its clock)"),
]
CLOCK_INCLUDES = "#include <sys/syscall.h>\n#include <ctime>\n#include <unistd.h>\n"
# Lab 13's stub trainer (the baseline's recipe: a score of about 1) whose every step hides nine tenths of its time
# from a clock of its own: in its own process the graded race sees it about ten times faster than the baseline;
# the race outside, on the grader's clock, does not.
CLOCK_TRAINER = (
    "long long hidden_ns = 0; extern \"C\" int clock_gettime(clockid_t id, timespec* ts) noexcept { "
    "long r = ::syscall(SYS_clock_gettime, id, ts); if (r == 0 && id == CLOCK_MONOTONIC) { long long t = "
    "ts->tv_sec * 1000000000LL + ts->tv_nsec - hidden_ns; ts->tv_sec = t / 1000000000LL; "
    "ts->tv_nsec = t % 1000000000LL; } return static_cast<int>(r); }\n")
CLOCK_STEP = (
    "static thread_local int depth = 0; if (depth == 0) { ++depth; timespec a, b; "
    "::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &a); step(); ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &b); "
    "hidden_ns += ((b.tv_sec - a.tv_sec) * 1000000000LL + b.tv_nsec - a.tv_nsec) * 9 / 10; --depth; return; }")
# A helper that would slow the other side: on the trainer's first step in the grader's race (argv[1] is "race"), a
# double-forked daemon on the race's one CPU that spins, 1 ms at a time, only while the trainer is stopped, that is
# while the baseline has its turn (for at most 900,000 looks, about a quarter of an hour). It looks from a thread of
# its own, and its first thread then exits alone (SYS_exit): the process reads Z, as an ended one does, while that
# thread runs on. Were it left running then, the baseline would run slower than the stub and the stub would seem
# faster; the race stops every thread of every process of the stub's sandbox, so it never runs then (had one
# escaped, its sandbox's CPU time while stopped fails the stub's side).
# Checked by hand: compiled alone and run as "PROGRAM race", its daemon spins while the program is stopped.
HELPER_INCLUDES = ("#include <cstdio>\n#include <cstring>\n#include <thread>\n#include <fcntl.h>\n"
                   "#include <sys/wait.h>\n")
HELPER_STEP = (
    "static bool helper_started = false; if (!helper_started) { helper_started = true; char c[4096] = {0}; "
    "int f = ::open(\"/proc/self/cmdline\", O_RDONLY); ssize_t n = f < 0 ? 0 : ::read(f, c, sizeof c - 1); "
    "if (f >= 0) ::close(f); const char* arg1 = c + std::strlen(c) + 1; char path[64]; "
    "std::snprintf(path, sizeof path, \"/proc/%d/stat\", static_cast<int>(::getpid())); "
    "pid_t first = n > 0 && arg1 < c + n && std::strcmp(arg1, \"race\") == 0 ? ::fork() : -1; "
    "if (first == 0) { ::setsid(); if (::fork() == 0) { std::thread([path] { "
    "for (int i = 0; i < 900000; ++i) { char st[512] = {0}; int g = ::open(path, O_RDONLY); if (g < 0) break; "
    "(void)!::read(g, st, sizeof st - 1); ::close(g); const char* p = std::strrchr(st, ')'); "
    "if (p && p[1] && p[2] == 'T') { timespec a, b; ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &a); "
    "do ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &b); while ((b.tv_sec - a.tv_sec) * 1000000000LL + "
    "b.tv_nsec - a.tv_nsec < 1000000LL); } else { ::usleep(1000); } } ::_exit(0); }).detach(); "
    "::syscall(SYS_exit, 0); } ::_exit(0); } "
    "if (first > 0) ::waitpid(first, nullptr, 0); }")
# What ./lab grade must give lab 01 of that submission: right answers, and no speed points (0 of 5, or not scored
# where the machine was too busy to decide: either way nothing earned).
EXPECTED_CLOCK = {
    "lab 01: sum_squares_eigen": (3, 3, "passed"),
    "lab 01: sum_squares_torch": (3, 3, "passed"),
    "lab 01: sum_squares_unrolled": (10, 10, "passed"),
    "lab 01: sum_squares_unrolled_speed": (0, 5, "timed outside your process"),
    "lab 10: on_gradient_ready": (10, 10, "passed"),
    "lab 10: wait_for_gradients": (10, 10, "passed"),
    "lab 10: on_gradient_ready_speed": (0, 5, "timed outside your process"),
    "lab 13: make_trainer": (10, 10, "passed"),
    "lab 13: make_trainer_speed": (0, 10, "raced by turns on one CPU"),
}

INCLUDES = ("#include <cmath>\n#include <csignal>\n#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n"
            "#include <new>\n#include <vector>\n#include <fcntl.h>\n#include <sys/prctl.h>\n#include <unistd.h>\n")

# What ./lab grade must give each attacked lab's exercises: (score, max_score, a piece of the output).
EXPECTED = {
    "lab 01: sum_squares_eigen": (0, 3, "ended before the test did"),
    "lab 01: sum_squares_torch": (0, 3, "timed out after"),
    "lab 01: sum_squares_unrolled": (0, 10, "checked outside your process"),
    "lab 01: sum_squares_unrolled_speed": (0, 5, "Lab01_sum_squares_unrolled_speed"),
    "lab 02: float_to_half_bits": (0, 10, "Lab02_float_to_half_bits"),
    "lab 02: half_bits_to_float": (0, 5, "Lab02_half_bits_to_float"),
    "lab 02: float_to_bfloat16_bits": (0, 5, "crashed with signal SIGSEGV"),
    "lab 02: float_to_bfloat16_bits_stochastic": (0, 5, "Lab02_float_to_bfloat16_bits_stochastic"),
    "lab 03: unscale_and_check": (0, 10, "crashed before any test started"),
    "lab 03: next_scale_state": (0, 10, "crashed before any test started"),
    "lab 03: GradScaler": (0, 20, "crashed before any test started"),
    "lab 03: mixed_precision_step": (0, 10, "crashed before any test started"),
    "lab 04: measure": (10, 10, "passed"),
    "lab 04: launch_sum_squares_reduction": (0, 0, "could not check it outside your process"),
    "lab 04: measure_pair": (10, 10, "passed"),
    "lab 05: causal_attention": (0, 10, "does not compile"),
    "lab 05: train_step": (0, 20, "does not compile"),
    "lab 09: online_softmax": (0, 10, "ended before the test did"),
    "lab 09: tiled_attention_forward": (20, 20, "passed"),
    "lab 09: tiled_attention_forward_speed": (0, 5, "Lab09_tiled_attention_forward_speed"),
    "lab 09: flash_attention_forward": (10, 10, "passed"),  # a GPU exercise: skipped without one (below)
    "lab 10: on_gradient_ready": (0, 10, "checked outside your process"),
    "lab 10: wait_for_gradients": (0, 10, "Lab10_wait_for_gradients"),
    "lab 10: on_gradient_ready_speed": (0, 5, "Lab10_on_gradient_ready_speed"),
    "lab 14: column_parallel_forward": (5, 5, "passed"),
    "lab 14: column_parallel_backward": (10, 10, "passed"),
    "lab 14: row_parallel_forward": (10, 10, "passed"),
    "lab 14: row_parallel_backward": (5, 5, "passed"),
    "lab 14: one_f_one_b_schedule": (0, 10, "checked outside your process"),
}


def attack(text, function, statement):
    if function is None:
        return text + "\n" + statement + "\n"
    definition = re.search(rf"^\S[^\n;]*\b{re.escape(function)}\(", text, re.M)
    if definition is None:
        raise SystemExit(f"cheats: no definition of {function} found")
    body = text.index("{", definition.end())
    return text[:body + 1] + " " + statement + " " + text[body + 1:]


def write(folder, attacks=ATTACKS):
    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    # The exercises only: a submission's predictions are its own, and this one makes none (blank, 0 points).
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("predictions.toml"))
    for lab, function, statement, _ in attacks:
        path = folder / lab / "exercise.cpp"
        text = path.read_text()
        if not text.startswith(INCLUDES):
            text = INCLUDES + text
        path.write_text(attack(text, function, statement))


def clock(folder):
    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    for lab in sorted({lab for lab, _, _, _ in CLOCK}):
        text = CLOCK_INCLUDES + (ROOT / "solutions" / lab / "exercise.cpp").read_text()
        for attacked, function, statement, _ in CLOCK:
            if attacked == lab:
                text = attack(text, function, statement)
        (folder / lab).mkdir(parents=True)
        (folder / lab / "exercise.cpp").write_text(text)
    (folder / "13_speedrun").mkdir()
    text = (ROOT / "labs/13_speedrun/exercise.cpp").read_text()
    stub = "class YourTrainer : public RecipeTrainer {};"
    assert text.count(stub) == 1, "cheats: lab 13's stub has no YourTrainer to attack"
    attacked = ("class YourTrainer : public RecipeTrainer {\n public:\n  void step() override { " + HELPER_STEP + " " +
                CLOCK_STEP + " RecipeTrainer::step(); }\n};")
    text = text.replace(stub, attacked).replace(
        '#include "exercise.h"\n', '#include "exercise.h"\n' + CLOCK_INCLUDES + HELPER_INCLUDES)
    (folder / "13_speedrun" / "exercise.cpp").write_text(text.replace("namespace lab13 {", CLOCK_TRAINER +
                                                                      "namespace lab13 {", 1))


def verify_clock(results_path, expected=EXPECTED_CLOCK):
    tests = {t["name"]: t for t in json.loads(Path(results_path).read_text())["tests"]}
    problems = []
    for name, (score, max_score, text) in expected.items():
        got = tests.get(name, {"score": None, "max_score": None, "output": "not in results.json"})
        print(f"  {name}: {got['score']} / {got['max_score']}, {got['output'][:200]}")
        undecided = name.endswith("_speed") and got["score"] == 0 and got["max_score"] == 0 and \
            "could not decide" in got["output"] and text in got["output"]
        if not undecided and ((got["score"], got["max_score"]) != (score, max_score) or text not in got["output"]):
            problems.append(f"{name}: expected {score} / {max_score} and '{text}' in the output")
    for problem in problems:
        print("cheats: " + problem, file=sys.stderr)
    return 1 if problems else 0


def honest(folder):
    folder = Path(folder)
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("predictions.toml"))


def verify(results_path):
    results = json.loads(Path(results_path).read_text())
    tests = {t["name"]: t for t in results["tests"]}
    problems = []
    if len(tests) != len(results["tests"]):
        problems.append("an exercise is listed twice (a lab named twice was graded twice)")
    # The submission holds no predictions.toml: each lab's predictions part is the blank file's, 0 points.
    for name in [n for n in tests if n.endswith(": predictions")]:
        if tests.pop(name)["score"] != 0:
            problems.append(f"{name}: blank predictions earned points")
    total = 0
    # The speed of an honest exercise: full points where the run decided, or not scored at all where the machine
    # was too busy to decide (said, never a silent 0). The speed of an attacked exercise is in EXPECTED: 0.
    for name in [n for n in tests if n.endswith("_speed") and n not in EXPECTED]:
        got = tests.pop(name)
        undecided = got["max_score"] == 0 and "could not decide" in got["output"]
        print(f"  {name}: {got['score']:g} / {got['max_score']:g}, {got['output'][:160]}")
        if not undecided and got["score"] != got["max_score"]:
            problems.append(f"{name}: {got['score']:g} / {got['max_score']:g}, expected full points or undecided")
        total += got["score"]
    for name, (score, max_score, text) in EXPECTED.items():
        got = tests.get(name)
        if got is None:
            problems.append(f"{name}: not in results.json")
            continue
        line = f"{name}: {got['score']:g} / {got['max_score']:g}, {got['output'][:160]}"
        print("  " + line)
        if score == max_score and got["max_score"] == 0 and got["output"].startswith("skipped, not graded here"):
            continue  # an honest exercise that needs a GPU, on a machine without one: worth nothing either way
        total += score
        if (got["score"], got["max_score"]) != (score, max_score) or text not in got["output"]:
            problems.append(f"{line}\n    expected {score:g} / {max_score:g} and '{text}' in the output")
    unexpected = sorted(set(tests) - set(EXPECTED))
    if unexpected:
        problems.append("graded but not attacked nor expected: " + ", ".join(unexpected))
    if results["score"] != total:
        problems.append(f"total score {results['score']:g}, expected {total:g}")
    for problem in problems:
        print("cheats: " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1] == "honest":
        honest(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1] == "verify":
        sys.exit(verify(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "clock":
        clock(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1] == "verify-clock":
        sys.exit(verify_clock(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "limits":
        write(sys.argv[2], LIMITS)
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1] == "link":
        write(sys.argv[2], LINK)
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1] == "verify-link":
        sys.exit(verify_clock(sys.argv[2], EXPECTED_LINK))
    if len(sys.argv) == 3 and sys.argv[1] == "verify-limits":
        sys.exit(verify_clock(sys.argv[2], EXPECTED_LIMITS))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
