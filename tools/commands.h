// The obsaug CLI's subcommands, one file each; main.cpp dispatches to them.
// Each takes main's argv (argv[1] is the subcommand) and returns the exit
// status; mistakes on the command line throw UsageError (tools/args.h).
#pragma once

#include <string>

namespace obsaug::cli {

extern const char kUsage[];  // the --help text (main.cpp)

struct Args;
// The config file the subcommand names (--config FILE or the one positional):
// a path, or a preset name (configs/ beside the executable's package); an
// unknown name is a UsageError listing the presets. config_file.cpp.
std::string config_file(const std::string& command, const Args& args);
// The checkout this executable was built in (build/tools/obsaug under it),
// or "" (installed from a wheel): the base_dir of load_config_file, so a
// config's data/photos is found there as Python's Engine finds it.
// config_file.cpp.
std::string checkout_root();

int check_config_command(int argc, char** argv);  // check_config.cpp
int bench_command(int argc, char** argv);         // bench.cpp
int preview_command(int argc, char** argv);       // preview.cpp

}  // namespace obsaug::cli
