// Subprocess.h - how `megatrain` finds and starts the tools and Python helpers it drives.
#pragma once

#include <string>
#include <vector>

namespace megatrain::driver {

// The folder of the running binary (/proc/self/exe): where the sibling tools are.
std::string binaryDir();

// `dir/name` when it is an executable file there; "" otherwise.
std::string siblingTool(const std::string& name);

// The first executable `name` on PATH; "" when there is none.
std::string findOnPath(const std::string& name);

// frontends/python/<script>, found from the binary: in the checkout that holds its build
// folder (build/bin/..), in the source folder the build was configured from, or in an
// install's share/megatrain/python/.
// An Error naming the places looked in when it is nowhere.
std::string pythonScript(const std::string& script);

// The Python interpreter (`chosen`, else $MEGATRAIN_PYTHON, else python3 on PATH) with
// `modules` importable; an Error naming the missing interpreter or module and how to
// install it otherwise.
std::string requirePython(const std::vector<std::string>& modules, const std::string& chosen = "");

// Replaces this process with argv[0] (a path) and its arguments; returns only by
// throwing an Error.
[[noreturn]] void execProgram(const std::vector<std::string>& argv);

// Runs argv[0] (a path) with its arguments, standard streams shared, and waits; returns
// its exit status (128 + the signal when a signal ended it).
int runProgram(const std::vector<std::string>& argv);

// Runs argv and returns what it printed on standard output; "" when it failed.
std::string captureProgram(const std::vector<std::string>& argv);

// argv as one shell-quoted line, for progress messages and stamps.
std::string commandLine(const std::vector<std::string>& argv);

}  // namespace megatrain::driver
