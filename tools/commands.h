// The obsaug CLI's subcommands, one file each; main.cpp dispatches to them.
// Each takes main's argv (argv[1] is the subcommand) and returns the exit
// status; mistakes on the command line throw UsageError (tools/args.h).
#pragma once

namespace obsaug::cli {

extern const char kUsage[];  // the --help text (main.cpp)

int check_config_command(int argc, char** argv);  // check_config.cpp
int bench_command(int argc, char** argv);         // bench.cpp
int preview_command(int argc, char** argv);       // preview.cpp

}  // namespace obsaug::cli
