// Where obsaug finds the files a config names without a path of their own:
// the presets by name and the embedded photographs. Each lookup order is
// written here only; the config loader, the CLI and Python (obsaug.locations,
// through obsaug._C) call these functions.
#pragma once

#include <string>
#include <vector>

namespace obsaug {

// The pool source that names the embedded photographs (DESIGN.md section 4)
// in a config's pool.sources, as the presets write it.
inline constexpr char kEmbeddedPhotos[] = "data/photos";

// The user cache folder that `obsaug fetch-photos` fills:
// $XDG_CACHE_HOME/obsaug/photos, else $HOME/.cache/obsaug/photos; "" when
// neither variable is set.
std::string photo_cache_dir();

// The folder of the embedded photographs, first found of:
//   1. $OBSAUG_PHOTOS when set (then it must exist: no fallback hides a typo),
//   2. photo_cache_dir() (DESIGN.md section 6: the user cache before a checkout),
//   3. <root>/data/photos for each of `roots` in order (the working directory,
//      then the checkout the config came from).
// The result is absolute. With no photographs anywhere, std::invalid_argument
// that names where it looked, `obsaug fetch-photos` and OBSAUG_PHOTOS.
std::string find_embedded_photos(const std::vector<std::string>& roots);

// A config file given by path or by preset name. A regular file comes back
// unchanged; so does any text with a '/' (load_config_file reports it missing
// or a folder), except a missing path whose file name (".yaml" or none) is a
// preset's: std::invalid_argument "cannot open the config file" naming the
// preset to pass instead. Otherwise the text is a preset name, with or without ".yaml",
// looked up in `preset_dirs` in order, so a folder of that name in the working
// directory does not hide the preset; a name that is no preset but exists (a
// folder) comes back unchanged for load_config_file to report, and an unknown
// one throws std::invalid_argument listing the presets.
std::string find_config(const std::string& name_or_path,
                        const std::vector<std::string>& preset_dirs);

// The preset names (file names without ".yaml") in `preset_dirs`, sorted,
// each once.
std::vector<std::string> preset_names(const std::vector<std::string>& preset_dirs);

}  // namespace obsaug
