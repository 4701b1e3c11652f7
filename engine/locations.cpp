#include "engine/locations.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace obsaug {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

bool is_dir(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

std::string absolute_normal(const fs::path& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return (ec ? path : abs).lexically_normal().string();
}

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

}  // namespace

std::string photo_cache_dir() {
  const std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty()) return (fs::path(xdg) / "obsaug" / "photos").string();
  const std::string home = env("HOME");
  if (!home.empty()) return (fs::path(home) / ".cache" / "obsaug" / "photos").string();
  return "";
}

std::string find_embedded_photos(const std::vector<std::string>& roots) {
  const std::string fetch_hint =
      "run `obsaug fetch-photos` to download the embedded photographs (Debian packages) into "
      "the user cache, or set OBSAUG_PHOTOS to a folder of .jpg/.png images (in a checkout, "
      "`bash scripts/fetch_photos.sh` fills data/photos)";
  const std::string from_env = env("OBSAUG_PHOTOS");
  if (!from_env.empty()) {
    if (is_dir(from_env)) return absolute_normal(from_env);
    throw std::invalid_argument("OBSAUG_PHOTOS=" + from_env +
                                " is not a folder; point it at a folder of .jpg/.png images, "
                                "or unset it and run `obsaug fetch-photos`");
  }
  std::vector<std::string> looked;
  const std::string cache = photo_cache_dir();
  if (!cache.empty()) {
    if (is_dir(cache)) return absolute_normal(cache);
    looked.push_back(cache);
  }
  for (const std::string& root : roots) {
    const std::string candidate = absolute_normal(fs::path(root) / kEmbeddedPhotos);
    if (is_dir(candidate)) return candidate;
    if (std::find(looked.begin(), looked.end(), candidate) == looked.end())
      looked.push_back(candidate);
  }
  throw std::invalid_argument("no embedded photographs: OBSAUG_PHOTOS is not set and none of " +
                              joined(looked, ", ") + " exists; " + fetch_hint);
}

std::vector<std::string> preset_names(const std::vector<std::string>& preset_dirs) {
  std::vector<std::string> names;
  for (const std::string& dir : preset_dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->path().extension() == ".yaml") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string find_config(const std::string& name_or_path,
                        const std::vector<std::string>& preset_dirs) {
  std::error_code ec;
  // A folder of the preset's name in the working directory (a run's results)
  // does not hide the preset: only a file does.
  if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  if (name_or_path.find('/') != std::string::npos) {
    // A missing path whose file is named like a preset ("configs/drq_shift.yaml"
    // copied from the README, run outside the checkout): said with the name.
    const fs::path path(name_or_path);
    const std::string stem = path.extension() == ".yaml" || path.extension().empty()
                                 ? path.stem().string()
                                 : std::string();
    const std::vector<std::string> names = preset_names(preset_dirs);
    if (!fs::exists(path, ec) && !stem.empty() &&
        std::find(names.begin(), names.end(), stem) != names.end()) {
      throw std::invalid_argument(
          name_or_path + ": cannot open the config file (no such file); \"" + stem +
          "\" is a preset: give its name (obsaug.Engine(\"" + stem + "\"), obsaug check-config " +
          stem + ") to load it from anywhere");
    }
    return name_or_path;
  }
  const fs::path file = fs::path(name_or_path).extension() == ".yaml"
                            ? fs::path(name_or_path)
                            : fs::path(name_or_path + ".yaml");
  for (const std::string& dir : preset_dirs)
    if (fs::is_regular_file(fs::path(dir) / file, ec))
      return (fs::path(dir) / file).lexically_normal().string();
  // Anything else there (a folder, a FIFO) is reported by load_config_file.
  if (fs::exists(name_or_path, ec)) return name_or_path;
  const std::vector<std::string> names = preset_names(preset_dirs);
  throw std::invalid_argument(
      "config '" + name_or_path + "' is neither a file nor a preset; the presets are " +
      (names.empty() ? std::string("missing (looked in ") + joined(preset_dirs, ", ") + ")"
                     : joined(names, ", ")) +
      ", or give the path of a YAML file");
}

}  // namespace obsaug
