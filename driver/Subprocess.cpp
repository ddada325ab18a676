// Subprocess.cpp - how `megatrain` finds and starts the tools and Python helpers it drives.
#include "Subprocess.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "megatrain/plan/Error.h"

extern char** environ;

namespace megatrain::driver {
namespace {

bool isExecutable(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::vector<char*> cArgs(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  return args;
}

}  // namespace

std::string binaryDir() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw Error("cannot find this binary's folder (/proc/self/exe): " + error.message());
  return self.parent_path().string();
}

std::string siblingTool(const std::string& name) {
  const std::string path = binaryDir() + "/" + name;
  return isExecutable(path) ? path : std::string();
}

std::string findOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t colon = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, colon - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (isExecutable(candidate)) return candidate;
    start = colon + 1;
  }
  return "";
}

std::string pythonScript(const std::string& script) {
  const std::filesystem::path bin = binaryDir();
  std::vector<std::filesystem::path> candidates;
  // A build folder inside a checkout (build/bin, build-gpu/bin carried to another
  // machine): the checkout's frontends/python.
  candidates.push_back(bin.parent_path().parent_path() / "frontends/python" / script);
  // A build tree elsewhere: the source folder it was configured from.
  candidates.push_back(std::filesystem::path(MEGATRAIN_SOURCE_DIR) / "frontends/python" / script);
  // An install: <prefix>/bin/megatrain and <prefix>/share/megatrain/python/.
  candidates.push_back(bin.parent_path() / "share/megatrain/python" / script);
  std::string looked;
  for (const std::filesystem::path& candidate : candidates) {
    if (std::filesystem::is_regular_file(candidate)) return candidate.string();
    looked += (looked.empty() ? "" : ", ") + candidate.string();
  }
  throw Error("cannot find " + script + " (looked in " + looked + ")");
}

std::string requirePython(const std::vector<std::string>& modules, const std::string& chosen) {
  const char* env = std::getenv("MEGATRAIN_PYTHON");
  const std::string given = !chosen.empty() ? chosen : env && *env ? std::string(env) : std::string();
  const std::string from = !chosen.empty() ? "--python " : "MEGATRAIN_PYTHON=";
  std::string python = given;
  if (!given.empty() && given.find('/') == std::string::npos) python = findOnPath(given);
  if (!given.empty() && (python.empty() || !isExecutable(python)))
    throw Error(from + given + " is not an executable Python interpreter");
  if (given.empty()) python = findOnPath("python3");
  if (python.empty())
    throw Error("python3 is not installed (or not on PATH); the Hugging Face steps need it with torch and "
                "transformers (pip install -r requirements-test.txt), or give one with MEGATRAIN_PYTHON");
  // find_spec does not import: quick even for torch.
  std::string check = "import importlib.util, sys; missing = [m for m in sys.argv[1:] if "
                      "importlib.util.find_spec(m) is None]; print(' '.join(missing))";
  std::vector<std::string> argv = {python, "-c", check};
  argv.insert(argv.end(), modules.begin(), modules.end());
  std::string missing = captureProgram(argv);
  while (!missing.empty() && (missing.back() == '\n' || missing.back() == ' ')) missing.pop_back();
  if (!missing.empty())
    throw Error(python + " lacks the Python package(s) " + missing + " (pip install " + missing +
                ", or set MEGATRAIN_PYTHON to an interpreter that has them)");
  return python;
}

void execProgram(const std::vector<std::string>& argv) {
  std::vector<char*> args = cArgs(argv);
  ::execv(argv[0].c_str(), args.data());
  throw Error("cannot run " + argv[0] + ": " + std::strerror(errno));
}

int runProgram(const std::vector<std::string>& argv) {
  std::vector<char*> args = cArgs(argv);
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, argv[0].c_str(), nullptr, nullptr, args.data(), environ);
  if (error != 0) throw Error("cannot run " + argv[0] + ": " + std::strerror(error));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error("waiting for " + argv[0] + ": " + std::strerror(errno));
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::string captureProgram(const std::vector<std::string>& argv) {
  int pipeFds[2];
  if (::pipe(pipeFds) != 0) return "";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipeFds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipeFds[0]);
  std::vector<char*> args = cArgs(argv);
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipeFds[1]);
  std::string out;
  if (error == 0) {
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(pipeFds[0], buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0) out.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipeFds[0]);
  if (error != 0) return "";
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? out : std::string();
}

std::string commandLine(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) {
    const bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~!") == std::string::npos;
    std::string quoted = plain ? arg : "'";
    if (!plain) {
      for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      quoted += "'";
    }
    line += (line.empty() ? "" : " ") + quoted;
  }
  return line;
}

}  // namespace megatrain::driver
