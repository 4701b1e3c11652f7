"""Where obsaug finds presets and the embedded photographs (engine/locations.h,
python/obsaug/locations.py): the photo lookup order ($OBSAUG_PHOTOS, then
the user cache, then data/photos under the working directory and the
checkout: DESIGN.md section 6), the error with no photographs at all, presets by name from any
working directory, and the console command's check-config by name.
"""
import os
import subprocess
import sys

import pytest

from conftest import CLI, CONFIGS, PYDIR, ROOT, needs_cli, raises, require_component

import obsaug
from obsaug import locations

pytestmark = require_component("Engine")

PRESETS = ("atari", "default", "drq_shift", "rad_crop", "svea_overlay")


@pytest.fixture
def no_photo_env(monkeypatch, tmp_path):
    """No $OBSAUG_PHOTOS, an empty user cache, an empty working directory."""
    monkeypatch.delenv("OBSAUG_PHOTOS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


def make_photos(folder, count=4):
    from PIL import Image
    folder.mkdir(parents=True)
    for i in range(count):
        Image.new("RGB", (96, 96), (40 * i, 255 - 40 * i, 128)).save(folder / f"p{i}.png")
    return folder


def overlay_config(**pool):
    return {"frames": {"stack": 1, "channels": 3, "height": 84, "width": 84},
            "pipeline": [{"op": "overlay", "alpha": 0.5}],
            "pool": {"size": 4, "sources": ["data/photos"], "refresh": {"threads": 0}, **pool}}


# --- the photo lookup order ---------------------------------------------------------


def test_cache_dir_is_xdg_cache_home_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert locations.photo_cache_dir() == str(tmp_path / "xdg" / "obsaug" / "photos")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert locations.photo_cache_dir() == str(tmp_path / "home" / ".cache" / "obsaug" / "photos")


def test_order_env_then_cache_then_roots_in_order(no_photo_env, monkeypatch):
    tmp = no_photo_env
    first, second = tmp / "first", tmp / "second"
    cache = tmp / "cache" / "obsaug" / "photos"
    roots = [str(first), str(second)]
    for folder in (second / "data" / "photos", first / "data" / "photos", cache):
        folder.mkdir(parents=True)
        assert obsaug._C.find_embedded_photos(roots) == str(folder)  # the earliest present wins
    env = tmp / "env_photos"
    env.mkdir()
    monkeypatch.setenv("OBSAUG_PHOTOS", str(env))
    assert obsaug._C.find_embedded_photos(roots) == str(env)


def test_embedded_photos_looks_in_the_working_directory_first(no_photo_env):
    here = no_photo_env / "work" / "data" / "photos"
    here.mkdir(parents=True)
    assert locations.embedded_photos() == str(here)


def test_env_that_is_not_a_folder_is_an_error(no_photo_env, monkeypatch):
    monkeypatch.setenv("OBSAUG_PHOTOS", str(no_photo_env / "missing"))
    raises(ValueError, locations.embedded_photos, "OBSAUG_PHOTOS=", "is not a folder",
           "obsaug fetch-photos")


def test_no_photos_anywhere_says_how_to_get_them(no_photo_env):
    roots = [str(no_photo_env / "work")]
    raises(ValueError, lambda: obsaug._C.find_embedded_photos(roots), "no embedded photographs",
           str(no_photo_env / "work" / "data" / "photos"),
           str(no_photo_env / "cache" / "obsaug" / "photos"), "obsaug fetch-photos",
           "OBSAUG_PHOTOS")


def test_config_source_data_photos_follows_the_lookup(no_photo_env, monkeypatch):
    photos = make_photos(no_photo_env / "cache" / "obsaug" / "photos")
    with obsaug.Engine(overlay_config()) as engine:  # from the user cache
        assert engine.config["pool"]["sources"] == [str(photos)]
    env = make_photos(no_photo_env / "env_photos")
    monkeypatch.setenv("OBSAUG_PHOTOS", str(env))
    with obsaug.Engine(overlay_config()) as engine:
        assert engine.config["pool"]["sources"] == [str(env)]


def test_config_without_photos_names_the_key_and_the_fix(no_photo_env):
    # base_dir in place of the checkout, whose data/photos a dict would find
    work = str(no_photo_env / "work")
    raises(ValueError, lambda: obsaug.Engine(overlay_config(), base_dir=work), "pool.sources[0]",
           "no embedded photographs", "obsaug fetch-photos", "OBSAUG_PHOTOS")


def test_other_relative_sources_keep_their_lookup(no_photo_env, monkeypatch):
    make_photos(no_photo_env / "env_photos")
    monkeypatch.setenv("OBSAUG_PHOTOS", str(no_photo_env / "env_photos"))
    raises(ValueError, lambda: obsaug.Engine(overlay_config(sources=["data/my_photos"])),
           "pool.sources[0]", "'data/my_photos' does not exist")


def write_overlay_file(folder):
    """overlay_config() as a YAML file outside any checkout's configs/ (JSON is YAML)."""
    import json
    path = folder / "configs" / "aug.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(overlay_config()))
    return path


def test_config_file_finds_data_photos_as_a_dict_does(no_photo_env):
    """A file's data/photos falls back to base_dir (default: the checkout) as a dict's
    does, not only to the folder above the file's own."""
    path = write_overlay_file(no_photo_env / "project")
    checkout = no_photo_env / "checkout"
    photos = make_photos(checkout / "data" / "photos")
    for config in (str(path), path, "../project/configs/aug.yaml"):
        with obsaug.Engine(config, base_dir=checkout) as engine:
            assert engine.config["pool"]["sources"] == [str(photos)]
    with obsaug.Engine(overlay_config(), base_dir=checkout) as engine:
        assert engine.config["pool"]["sources"] == [str(photos)]
    # The folder above the file's configs/ still comes first (a project's own photos).
    own = make_photos(no_photo_env / "project" / "data" / "photos")
    with obsaug.Engine(path, base_dir=checkout) as engine:
        assert engine.config["pool"]["sources"] == [str(own)]


def checkout_photos():
    root = locations.checkout_root()
    if root is None or not os.path.isdir(os.path.join(root, "data", "photos")):
        pytest.skip("needs a checkout with data/photos (bash scripts/fetch_photos.sh)")
    return os.path.join(root, "data", "photos")


def test_config_file_falls_back_to_the_checkouts_photos(no_photo_env):
    photos = checkout_photos()
    path = write_overlay_file(no_photo_env / "project")
    with obsaug.Engine(str(path)) as by_path, obsaug.Engine(overlay_config()) as by_dict:
        assert by_path.config["pool"]["sources"] == by_dict.config["pool"]["sources"] == [photos]


@needs_cli
def test_cli_finds_the_checkouts_photos_for_a_file_elsewhere(no_photo_env):
    photos = checkout_photos()
    if os.path.realpath(os.path.dirname(CLI)) != os.path.join(os.path.realpath(ROOT), "build",
                                                              "tools"):
        pytest.skip("the CLI under test is not this checkout's build/tools/obsaug")
    path = write_overlay_file(no_photo_env / "project")
    env = {k: v for k, v in os.environ.items() if k != "OBSAUG_PHOTOS"}
    env["XDG_CACHE_HOME"] = str(no_photo_env / "cache")
    r = subprocess.run([CLI, "check-config", str(path)], capture_output=True, text=True,
                       cwd=no_photo_env / "work", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert photos in r.stdout


# --- presets by name ------------------------------------------------------------------


def test_preset_names_are_the_configs():
    assert set(PRESETS) <= set(locations.preset_names())


@pytest.mark.parametrize("name", ["drq_shift", "drq_shift.yaml"])
def test_preset_by_name_from_any_directory(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with obsaug.Engine(name) as by_name, \
            obsaug.Engine(os.path.join(CONFIGS, "drq_shift.yaml")) as by_path:
        assert by_name.config == by_path.config
    assert locations.find_config(name) == os.path.join(CONFIGS, "drq_shift.yaml")


def test_a_path_wins_over_a_preset_of_that_name(tmp_path, monkeypatch):
    (tmp_path / "drq_shift").write_text("frames: {stack: 2}\npipeline: []\n")
    monkeypatch.chdir(tmp_path)
    with obsaug.Engine("drq_shift") as engine:
        assert engine.config["frames"]["stack"] == 2


@pytest.mark.parametrize("folder", ["drq_shift", "drq_shift.yaml"])
def test_a_folder_does_not_hide_a_preset_of_that_name(folder, tmp_path, monkeypatch):
    """Presets load by name from any working directory (DESIGN.md section 6), also one
    holding a folder of that name (a project's drq_shift/ of results)."""
    (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path)
    assert locations.find_config(folder) == os.path.join(CONFIGS, "drq_shift.yaml")
    with obsaug.Engine(folder) as engine:
        assert engine.config["pipeline"][0]["op"] == "shift"


def test_a_folder_that_is_no_preset_is_reported_as_a_folder(tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    monkeypatch.chdir(tmp_path)
    raises(ValueError, lambda: obsaug.Engine("results"), "results: is a directory")
    raises(ValueError, lambda: obsaug.Engine("./drq_shift"), "cannot open the config file")


@needs_cli
def test_cli_a_folder_does_not_hide_a_preset(tmp_path):
    (tmp_path / "drq_shift").mkdir()
    r = subprocess.run([CLI, "check-config", "drq_shift"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "op: shift" in r.stdout


def test_first_preset_dir_wins(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        (folder / "mine.yaml").write_text("pipeline: []\n")
    (second / "other.yaml").write_text("pipeline: []\n")
    dirs = [str(first), str(second)]
    assert obsaug._C.find_config("mine", dirs) == str(first / "mine.yaml")
    assert obsaug._C.preset_names(dirs) == ["mine", "other"]


def test_unknown_preset_lists_the_presets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raises(ValueError, lambda: obsaug.Engine("drq_shfit"), "'drq_shfit' is neither a file nor a preset",
           *PRESETS)


def test_missing_path_is_not_taken_for_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raises(ValueError, lambda: obsaug.Engine("configs/drq_shift.yaml"), "cannot open the config file")


# --- the command line ---------------------------------------------------------------


@needs_cli
def test_cli_check_config_by_name(tmp_path):
    r = subprocess.run([CLI, "check-config", "drq_shift"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "valid" in r.stdout and "op: shift" in r.stdout
    r = subprocess.run([CLI, "check-config", "drq_shfit"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 2
    assert "'drq_shfit' is neither a file nor a preset" in r.stderr and "drq_shift" in r.stderr


@needs_cli
def test_console_command_runs_the_tool(tmp_path):
    env = dict(os.environ, PYTHONPATH=PYDIR)
    r = subprocess.run([sys.executable, "-m", "obsaug", "check-config", "rad_crop"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "op: crop" in r.stdout
    r = subprocess.run([sys.executable, "-m", "obsaug", "fetch-photos", "--help"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "--force" in r.stdout and "user cache" in r.stdout
