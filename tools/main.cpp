// The `obsaug` command-line tool (DESIGN.md section 7):
//
//   obsaug check-config FILE                 validate a config, print it resolved
//   (FILE: a path or a preset name such as drq_shift, see config_file.cpp)
//   obsaug bench --config FILE [options]     stream N augmented samples, report rates
//   obsaug preview --config FILE --out PNG   original and augmented frames side by side
//
// Everything goes through obsaug::Engine (engine/engine.h), exactly as a C++
// agent would use it. One file per subcommand (tools/commands.h); this one
// holds the help text, the dispatch and the exit status: 0 ok, 2 usage or
// configuration error, 1 runtime error; errors are one line on stderr
// starting with "obsaug: ".
//
// Built into build/tools/obsaug. Linked with libtorch, so no std::filesystem
// in tools/ (libtorch exports incompatible copies of it): stdio and POSIX.
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "engine/config.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace obsaug::cli {

const char kUsage[] =
    R"(obsaug: observation augmentation for RL (shift, crop, distractor overlay)

usage:
  obsaug check-config FILE
      Load and validate a YAML config; print it with every default and
      inferred value spelled out. FILE is a path or a preset name
      (a configs/*.yaml name such as default or drq_shift; an unknown name
      lists them), here and below.
  obsaug bench --config FILE [--batch B] [--samples N] [--threads T]
               [--inplace | --out-of-place]
      Stream N augmented samples through the engine in batches of B random
      uint8 observations [B, S*C, H, W] on the config's device; print
      samples/s, bytes/s and the distractor pool's counters.
        --batch B        observations per augment call (default 256)
        --samples N      samples to augment in all (default 10000000, at
                         most 1e14)
        --threads T      intra-op threads, 1..1024 (default: all cores but
                         one per background pool decoder, at least 1)
        --inplace        augment_ on the batch (default; needs a pipeline
                         that keeps the frame size and uint8 output)
        --out-of-place   augment, a new output tensor per call
        --replay CAP     sample+augment instead: fill an obsaug::ReplayBuffer
                         of CAP frames (synthetic episodes of 1000 steps),
                         then per call add one step and sample B transitions
                         with fused augmentation of obs and next_obs into
                         new tensors (counts B samples per call; not with
                         --inplace); CAP >= frames.stack + 2 (at least 3),
                         so that a transition is always stored
  obsaug preview --config FILE --out GRID.png [--batch B] [--seed-step S]
                 [--scale K]
      Augment B synthetic scenes (a cart-pole-like render, S stacked frames
      of motion) and write a PNG grid: one row per sample, its S original
      frames, then its S augmented frames.
        --batch B        rows, 1..4096 (default 8)
        --seed-step S    the step the augmentation draws with, 0..2^64-1
                         (default 0)
        --scale K        nearest-neighbour magnification, 1..64 (default 2);
                         the grid must stay within 1000000 pixels a side
                         and 1 GiB
  obsaug fetch-photos [--force] [--dest DIR]
      Download the embedded photographs (Debian packages) into the user
      cache ($XDG_CACHE_HOME/obsaug/photos, else ~/.cache/obsaug/photos),
      where a config's `data/photos` source finds them outside a checkout
      ($OBSAUG_PHOTOS comes first). Part of the installed console command
      (pip install .), not of this binary.
  obsaug help | --help
      This text.

exit status: 0 ok, 2 usage or configuration error, 1 runtime error.
)";

namespace {

int run(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "check-config") return check_config_command(argc, argv);
  if (command == "bench") return bench_command(argc, argv);
  if (command == "preview") return preview_command(argc, argv);
  if (command == "fetch-photos")
    throw UsageError(
        "fetch-photos belongs to the installed console command (pip install ., then "
        "`obsaug fetch-photos`, or `python -m obsaug fetch-photos`); in a checkout, "
        "`bash scripts/fetch_photos.sh` fills data/photos");
  throw UsageError("unknown command '" + command +
                   "' (commands: check-config, bench, preview, fetch-photos, help)");
}

}  // namespace
}  // namespace obsaug::cli

int main(int argc, char** argv) {
  try {
    return obsaug::cli::run(argc, argv);
  } catch (const obsaug::cli::UsageError& e) {
    std::fprintf(stderr, "obsaug: %s (see obsaug --help)\n", e.what());
    return 2;
  } catch (const obsaug::ConfigError& e) {
    std::fprintf(stderr, "obsaug: %s\n", e.what());
    return 2;
  } catch (const c10::Error& e) {
    // Torch's first line is the message; the rest is debugging advice.
    std::string message = e.what_without_backtrace();
    std::fprintf(stderr, "obsaug: error: %s\n", message.substr(0, message.find('\n')).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::fprintf(stderr, "obsaug: error: %s\n", message.c_str());
    return 1;
  }
}
