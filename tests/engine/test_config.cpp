// obsaug::Config (engine/config.*): every class of mistake fails with the
// key's path and what is allowed, every preset under configs/ loads, the
// pipeline converts to OpSpecs the kernels accept, and describe() and JSON
// text (what the Python binding sends for a dict) load to the same Config.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/config.h"
#include "kernels/pipeline_spec.h"
#include "tests/test_util.h"

namespace obsaug {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

const fs::path kSourceDir = OBSAUG_SOURCE_DIR;

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// Runs `load`, expects a ConfigError at `key` whose message holds every one of `parts`.
ConfigError expect_error(const std::function<void()>& load, const std::string& key,
                         const std::vector<std::string>& parts) {
  try {
    load();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), key) << e.what();
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' not in: " << e.what();
    return e;
  }
  ADD_FAILURE() << "no ConfigError; expected one at " << key;
  return ConfigError("", "", "");
}

// Loads `yaml` from a string; relative sources resolve in `base` (a temp dir
// holding a folder "photos").
class ConfigText : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(tmp_.path() / "photos"); }
  Config load(const std::string& yaml) {
    return load_config_string(yaml, "<test>", tmp_.path().string());
  }
  void expect(const std::string& yaml, const std::string& key,
              const std::vector<std::string>& parts) {
    SCOPED_TRACE(yaml);
    expect_error([&] { load(yaml); }, key, parts);
  }
  std::string photos() const { return (tmp_.path() / "photos").string(); }
  TempDir tmp_;
};

// ---------------------------------------------------------------- defaults

TEST(ConfigDefaults, EmptyMappingGivesTheDocumentedDefaults) {
  const Config c = load_config_string("{}");
  EXPECT_EQ(c, Config{});
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.seed, 0u);
  EXPECT_EQ(c.frames.stack, 3);
  EXPECT_EQ(c.frames.channels, 3);
  EXPECT_EQ(c.frames.height, 84);
  EXPECT_EQ(c.frames.width, 84);
  EXPECT_TRUE(c.pipeline.empty());
  EXPECT_EQ(c.pool.size, 1024);
  EXPECT_EQ(c.pool.image_height, 0);
  EXPECT_TRUE(c.pool.sources.empty());
  EXPECT_EQ(c.pool.refresh.threads, 1);
  EXPECT_EQ(c.pool.refresh.max_per_second, 0.0);
  EXPECT_EQ(c.pool.refresh.mode, RefreshMode::kAsync);
  EXPECT_EQ(c.pool.refresh.per_call, 8);
  EXPECT_EQ(c.output.dtype, OutputDtype::kUint8);
  EXPECT_EQ(c.output.scale, 1.0);
  EXPECT_EQ(c.output.bias, 0.0);
  EXPECT_EQ(c.origin, "<string>");
}

TEST(ConfigDefaults, NullMeansDefault) {
  const Config c =
      load_config_string("seed: ~\nframes: {stack: null}\npool:\noutput: {scale: null}\n");
  EXPECT_EQ(c, Config{});
}

TEST(ConfigDefaults, OpDefaults) {
  const Config c = load_config_string("pipeline: [{op: shift}, {op: crop, size: 80}]");
  ASSERT_EQ(c.pipeline.size(), 2u);
  EXPECT_EQ(c.pipeline[0].get_int("pad"), 4);
  EXPECT_EQ(c.pipeline[0].get_choice("padding"), "replicate");
  EXPECT_FALSE(c.pipeline[0].index().has_value());
  EXPECT_FALSE(c.pipeline[1].get_bool("center"));
}

// ---------------------------------------------------------------- mistakes

TEST_F(ConfigText, EmptyTextFails) {
  expect("", "", {"<test>: the config is empty", "device, seed, frames, pipeline, pool, output"});
  expect("[1, 2]", "", {"expected a mapping", "got a list"});
}

// yaml-cpp 0.7's LoadAll loops forever on these (found by tests/fuzz/fuzz_config);
// the loader must answer with an error at once.
TEST_F(ConfigText, MalformedFlowIndicatorsFailInsteadOfHanging) {
  for (const char* text : {",{", ",a{", "seed: 1\n,# {x}\n"}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(load(text), ConfigError);
  }
}

TEST_F(ConfigText, SecondDocumentIsRefused) {
  expect("seed: 1\n---\nseed: 2\n", "", {"2 YAML documents"});
  expect("---\nseed: 1\n---\nseed: 2\n", "", {"2 YAML documents"});
  expect("seed: 1\n...\nseed: 2\n", "", {"2 YAML documents"});
  expect("--- {seed: 1}\n--- {seed: 2}\n", "", {"2 YAML documents"});
  EXPECT_EQ(load("---\nseed: 3\n...\n").seed, 3u);
  EXPECT_EQ(load("# comment\n---\nseed: 4\n").seed, 4u);
  // Directives come before their document's "---"; an empty document after
  // the config adds nothing.
  EXPECT_EQ(load("%YAML 1.2\n---\nseed: 5\n").seed, 5u);
  EXPECT_EQ(load("%TAG !e! tag:example.com,2000:\n---\nseed: 6\n").seed, 6u);
  EXPECT_EQ(load("seed: 7\n---\n").seed, 7u);
  EXPECT_EQ(load("seed: 8\n---\n# nothing\n...\n").seed, 8u);
}

TEST_F(ConfigText, InvalidYamlNamesLineAndColumn) {
  expect("seed: 1\nframes: {stack: 3\n", "", {"<test>: invalid YAML at line"});
}

TEST_F(ConfigText, UnknownKeySuggestsTheNearest) {
  expect("pipline: []", "pipline",
         {"<test>: pipline: unknown key; did you mean 'pipeline'?",
          "device, seed, frames, pipeline, pool, output"});
  expect("pool: {szie: 3}", "pool.szie",
         {"did you mean 'size'?", "size, image_size, sources, refresh"});
  expect("pool: {refresh: {treads: 2}}", "pool.refresh.treads", {"did you mean 'threads'?"});
  expect("frames: {hieght: 2}", "frames.hieght", {"did you mean 'height'?"});
  expect("output: {dtpye: uint8}", "output.dtpye", {"did you mean 'dtype'?"});
  expect("pipeline: [{op: overlay, alpah: 0.3}]", "pipeline[0].alpah",
         {"did you mean 'alpha'?", "op, alpha, alpha_max, per_frame, distinct, index"});
  // Far from every known key: no suggestion, but the known keys are listed.
  const ConfigError e = expect_error([&] { load("colour_jitter: 1"); }, "colour_jitter",
                                     {"unknown key", "Known keys at the top level"});
  EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
}

TEST_F(ConfigText, KeyOfAnotherOp) {
  expect("pipeline: [{op: overlay, pad: 4}]", "pipeline[0].pad",
         {"does not apply to overlay",
          "overlay takes op, alpha, alpha_max, per_frame, distinct, index"});
  expect("pipeline: [{op: shift, size: 4}]", "pipeline[0].size", {"does not apply to shift"});
}

TEST_F(ConfigText, DuplicateKey) {
  expect("seed: 1\nseed: 2\n", "seed", {"given twice"});
  // In an op, before the op's name is read (the first would have won).
  expect("pipeline: [{op: shift, op: crop, size: 10}]", "pipeline[0].op", {"given twice"});
  expect("pipeline: [{op: shift, pad: 4, pad: 2}]", "pipeline[0].pad", {"given twice"});
}

TEST_F(ConfigText, NullOrNamelessOpKeys) {
  expect("pipeline: [{op: ~, pad: 4}]", "pipeline[0].op",
         {"must be one of shift, crop, overlay", "got null"});
  expect("pipeline: [{[a]: 1}]", "pipeline[0]", {"keys must be names such as op or pad"});
  expect("pipeline: [{pad: 4}]", "pipeline[0]", {"missing 'op'", "in the op with keys pad"});
}

TEST_F(ConfigText, WrongType) {
  expect("pool: {size: big}", "pool.size",
         {"<test>: pool.size: expected an integer in 1..2147483647, got 'big'"});
  expect("pool: {size: 2.5}", "pool.size", {"expected an integer in 1..2147483647, got '2.5'"});
  expect("frames: {stack: [1, 2]}", "frames.stack",
         {"expected an integer in 1..32767, got a list"});
  expect("frames: {height: \"84\"}", "frames.height",
         {"expected an integer in 1..1073741824, got the string '84'"});
  expect("frames: 3", "frames", {"expected a mapping with keys stack, channels, height, width"});
  expect("seed: abc", "seed", {"expected an integer in 0..18446744073709551615, got 'abc'"});
  expect("pipeline: [{op: overlay, alpha: half}]", "pipeline[0].alpha",
         {"expected a finite number, got 'half'"});
  expect("pipeline: [{op: overlay, alpha: .nan}]", "pipeline[0].alpha",
         {"expected a finite number"});
  expect("pipeline: [{op: crop, size: 80, center: 3}]", "pipeline[0].center",
         {"expected true or false, got '3'"});
  expect("pipeline: [{op: crop, size: [80]}]", "pipeline[0].size",
         {"expected an integer or [height, width], got a list of 1"});
  expect("pipeline: [{op: crop, size: 80x80}]", "pipeline[0].size",
         {"expected an integer, got '80x80'"});
  expect("pipeline: {op: shift}", "pipeline", {"expected a list of ops"});
  expect("pipeline: [shift]", "pipeline[0]", {"expected an op mapping", "got 'shift'"});
  expect("pool: {sources: data/photos}", "pool.sources", {"expected a list of paths"});
  expect("device: [cpu]", "device", {"expected a string, got a list"});
}

TEST_F(ConfigText, OutOfRange) {
  expect("frames: {stack: 0}", "frames.stack", {"must be in 1..32767, got 0"});
  expect("frames: {channels: 2}", "frames.channels", {"must be 1 (grayscale) or 3 (RGB), got 2"});
  expect("frames: {channels: 4}", "frames.channels", {"must be 1 (grayscale) or 3 (RGB), got 4"});
  expect("frames: {width: -84}", "frames.width", {"must be in 1..1073741824, got -84"});
  // Digits beyond int64 are out of range too, not "not an integer".
  expect("pool: {size: 99999999999999999999}", "pool.size",
         {"must be in 1..2147483647, got 99999999999999999999"});
  expect("seed: -1", "seed", {"must be in 0..18446744073709551615, got -1"});
  expect("seed: 18446744073709551616", "seed", {"must be in 0..18446744073709551615"});
  expect("device: gpu", "device", {"must be cpu, cuda or cuda:N", "got 'gpu'"});
  expect("device: 'cuda:x'", "device", {"must be cpu, cuda or cuda:N"});
  expect("pipeline: [{op: shift, pad: -1}]", "pipeline[0].pad", {"must be in 0..1048576, got -1"});
  expect("pipeline: [{op: shift, padding: reflect}]", "pipeline[0].padding",
         {"must be one of replicate, zeros; got 'reflect'"});
  expect("pipeline: [{op: shift, index: 70000}]", "pipeline[0].index",
         {"must be in 0..32767, got 70000"});
  expect("pipeline: [{op: crop, size: 0}]", "pipeline[0].size",
         {"must be in 1..1073741824 per side, got 0x0"});
  expect("pipeline: [{op: crop, size: [84, -1]}]", "pipeline[0].size",
         {"must be in 1..1073741824 per side, got 84x-1"});
  expect("pipeline: [{op: crop, size: 100}]", "pipeline[0].size",
         {"crop 100x100 is larger than its input 84x84 (the frame size at this stage); size "
          "must be at most 84x84"});
  expect("pipeline: [{op: crop, size: 80}, {op: crop, size: [60, 82]}]", "pipeline[1].size",
         {"crop 60x82 is larger than its input 80x80"});
  expect("pipeline: [{op: overlay, alpha: 1.5}]", "pipeline[0].alpha",
         {"must be in [0, 1], got 1.5"});
  expect("pipeline: [{op: overlay, alpha: -0.1}]", "pipeline[0].alpha", {"must be in [0, 1]"});
  expect("pipeline: [{op: overlay, alpha: 0.5, alpha_max: 0.4}]", "pipeline[0].alpha_max",
         {"must be in [alpha, 1] = [0.5, 1], got 0.4"});
  expect(
      "pipeline: [{op: shift},{op: shift},{op: shift},{op: shift},{op: shift},{op: shift},"
      "{op: shift},{op: shift},{op: shift}]",
      "pipeline", {"holds at most 8 ops, got 9"});
  expect("pool: {size: -5}", "pool.size", {"must be in 1..2147483647, got -5"});
  expect("pool: {size: 0}", "pool.size", {"must be in 1..2147483647, got 0"});
  expect("pool: {image_size: [84, -1]}", "pool.image_size[1]", {"must be in 1..1073741824"});
  expect("pool: {refresh: {threads: -1}}", "pool.refresh.threads", {"must be in 0..1024, got -1"});
  expect("pool: {refresh: {max_per_second: -3}}", "pool.refresh.max_per_second",
         {"must be 0 (no cap) or >= 0.001 images per second, got -3"});
  expect("pool: {refresh: {max_per_second: 1e-300}}", "pool.refresh.max_per_second",
         {"must be 0 (no cap) or >= 0.001 images per second, got 1e-300"});
  expect("pool: {refresh: {mode: sync, per_call: 0}}", "pool.refresh.per_call",
         {"must be >= 1 in sync mode", "got 0"});
  expect("pool: {size: 4, refresh: {mode: sync, per_call: 5}}", "pool.refresh.per_call",
         {"must be at most pool.size (4) in sync mode, got 5"});
  expect("pool: {refresh: {per_call: -1}}", "pool.refresh.per_call",
         {"must be in 0..2147483647, got -1"});
  // per_call 0 is fine in async mode, where it is unused.
  EXPECT_EQ(load("pool: {refresh: {per_call: 0}}").pool.refresh.per_call, 0);
}

// YAML 1.1 (PyYAML, OmegaConf) reads a leading zero as octal, so a file with
// one would give another number through yaml.safe_load and Engine(dict).
TEST_F(ConfigText, LeadingZerosAreRefusedAsAmbiguous) {
  expect("seed: 010", "seed",
         {"<test>: seed: ambiguous: YAML 1.1 reads 010 as octal 8; write 10 or 8"});
  expect("pipeline: [{op: shift, pad: 04}]", "pipeline[0].pad",
         {"ambiguous: YAML 1.1 reads 04 as octal 4; write 4"});
  expect("frames: {stack: -07}", "frames.stack", {"reads -07 as octal -7; write -7"});
  expect("pool: {size: +010}", "pool.size", {"reads +010 as octal 8; write 10 or 8"});
  expect("pool: {image_size: [84, 084]}", "pool.image_size[1]",
         {"ambiguous: YAML 1.1 reads 084 as a string; write 84"});
  expect("pipeline: [{op: overlay, alpha: 00}]", "pipeline[0].alpha",
         {"ambiguous: YAML 1.1 reads 00 as octal 0; write 0"});
  expect("pool: {refresh: {max_per_second: 012}}", "pool.refresh.max_per_second",
         {"reads 012 as octal 10; write 12 or 10"});
  // Zero itself, a fraction and an exponent read alike in YAML 1.1 and 1.2.
  EXPECT_EQ(load("seed: 0").seed, 0u);
  EXPECT_EQ(load("pipeline: [{op: shift, pad: 0}]").pipeline[0].get_int("pad"), 0);
  const std::string photos = "\npool: {sources: [photos]}";
  EXPECT_EQ(load("pipeline: [{op: overlay, alpha: 0.25}]" + photos).pipeline[0].get_float("alpha"),
            0.25);
  EXPECT_EQ(load("pipeline: [{op: overlay, alpha: 00.5}]" + photos).pipeline[0].get_float("alpha"),
            0.5);
  // Quoted, it is a string in both: the usual type error.
  expect("seed: '010'", "seed", {"expected an integer in 0..18446744073709551615"});
}

TEST_F(ConfigText, BadChoiceNamesTheAllowedValues) {
  const ConfigError e =
      expect_error([&] { load("pool: {refresh: {mode: asnc}}"); }, "pool.refresh.mode", {});
  EXPECT_STREQ(e.what(),
               "<test>: pool.refresh.mode: must be one of async, sync; got 'asnc' (did you mean "
               "'async'?)");
  expect("pipeline: [{op: shfit}]", "pipeline[0].op",
         {"must be one of shift, crop, overlay, flip, rotate, translate, cutout, grayscale, "
          "color_jitter, random_conv; got 'shfit' (did you mean 'shift'?)"});
}

TEST_F(ConfigText, MissingRequired) {
  expect("pipeline: [{op: shift}, {pad: 4, padding: zeros}]", "pipeline[1]",
         {"missing 'op' (one of shift, crop, overlay, flip, rotate, translate, cutout, grayscale, "
          "color_jitter, random_conv)",
          "keys pad, padding"});
  expect("pipeline: [{op: crop}]", "pipeline[0]", {"crop needs 'size' (N, or height and width)"});
  expect("pipeline: [{op: crop, size: ~}]", "pipeline[0]", {"crop needs 'size'"});
}

TEST_F(ConfigText, OverlayNeedsPoolSources) {
  expect("pipeline: [{op: shift}, {op: overlay}]", "pool.sources",
         {"overlay (pipeline[1]) but no pool sources", "bash scripts/fetch_photos.sh"});
  expect("pipeline: [{op: overlay}]\npool: {sources: []}", "pool.sources", {"no pool sources"});
}

TEST_F(ConfigText, MissingSourceSaysHowToGetPhotos) {
  expect("pool: {sources: [" + photos() + ", no/such/photos]}", "pool.sources[1]",
         {"'no/such/photos' does not exist", "bash scripts/fetch_photos.sh"});
  expect("pool: {sources: [/nonexistent/places365_standard]}", "pool.sources[0]",
         {"'/nonexistent/places365_standard' does not exist", "places365standard_easyformat.tar",
          "data/places365_standard/{train,val}"});
  expect("pool: {sources: [elsewhere/list.txt]}", "pool.sources[0]",
         {"does not exist", "a .txt list of image paths", "bash scripts/fetch_photos.sh"});
  expect("pool: {sources: ['']}", "pool.sources[0]", {"is empty"});
  // A NUL would cut the path short wherever it is used as a C string.
  expect("pool: {sources: [\"" + photos() + "\\0/no/such\"]}", "pool.sources[0]",
         {"contains a NUL byte"});
}

TEST_F(ConfigText, EmbeddedPhotosHoweverSpelt) {
  const fs::path embedded = tmp_.path() / "embedded";
  fs::create_directories(embedded);
  const testing::ScopedEnv env("OBSAUG_PHOTOS", embedded.string());
  for (const char* spelling : {"data/photos", "data/photos/", "./data/photos", "data//photos"}) {
    SCOPED_TRACE(spelling);
    const Config c = load(std::string("pool: {sources: [") + spelling + "]}");
    EXPECT_EQ(c.pool.sources, std::vector<std::string>{embedded.string()});
  }
}

TEST_F(ConfigText, OutputDtypeAndAffine) {
  expect("output: {dtype: float16}", "output.dtype",
         {"must be one of uint8, float32; got 'float16'"});
  expect("output: {scale: 0.5}", "output.scale",
         {"applies only to float32 output", "set output.dtype: float32"});
  expect("output: {dtype: uint8, bias: -0.5}", "output.bias", {"applies only to float32 output"});
  const Config c = load("output: {dtype: float32, scale: 0.00392156862745098, bias: -0.5}");
  EXPECT_EQ(c.output.dtype, OutputDtype::kFloat32);
  EXPECT_EQ(c.output.scale, 1.0 / 255.0);
  EXPECT_EQ(c.output.bias, -0.5);
  // float32 must hold scale, bias and every v * scale + bias, v in 0..255.
  expect("output: {dtype: float32, scale: 1e308}", "output.scale", {"beyond float32"});
  expect("output: {dtype: float32, bias: -1e39}", "output.bias", {"beyond float32"});
  expect("output: {dtype: float32, scale: 0.00392156862745098, bias: 1.0e39}", "output.bias",
         {"scale=0.00392157 bias=1e+39 are beyond float32"});
  expect("output: {dtype: float32, scale: 1e-50}", "output.scale", {"rounds to 0 in float32"});
  expect("output: {dtype: float32, scale: 1e36, bias: 3.3e38}", "output.bias",
         {"overflow float32 (255 * scale + bias is not finite)"});
  EXPECT_EQ(load("output: {dtype: float32, scale: 0, bias: 3e38}").output.bias, 3e38);
  // The identity affine is allowed with uint8 (describe() prints it).
  EXPECT_EQ(load("output: {dtype: uint8, scale: 1, bias: 0}").output.dtype, OutputDtype::kUint8);
}

TEST_F(ConfigText, FileErrorsNameTheFileAndLine) {
  const fs::path file = tmp_.path() / "configs" / "bad.yaml";
  write_text(file, "seed: 1\npool:\n  refresh:\n    mode: asnc\n");
  expect_error(
      [&] { load_config_file(file.string()); }, "pool.refresh.mode",
      {file.string() + ": pool.refresh.mode: must be one of async, sync; got 'asnc'", "(line 4)"});
  expect_error([&] { load_config_file((tmp_.path() / "missing.yaml").string()); }, "",
               {"missing.yaml: cannot open the config file"});
  expect_error([&] { load_config_file(tmp_.path().string()); }, "", {"is a directory"});
}

// ---------------------------------------------------------------- pipeline conversion

TEST_F(ConfigText, PipelineConversion) {
  const Config c = load(
      "frames: {stack: 2, channels: 1, height: 84, width: 84}\n"
      "pipeline:\n"
      "  - {op: shift, pad: 2, padding: zeros}\n"
      "  - {op: crop, size: [80, 76], center: true}\n"
      "  - {op: overlay, alpha: 0.25, alpha_max: 0.75, per_frame: true, index: 7}\n"
      "pool: {size: 16, sources: [photos]}\n");
  ASSERT_EQ(c.pipeline.size(), 3u);
  EXPECT_EQ(c.pipeline[0], OpSpec::shift(2, "zeros"));
  EXPECT_EQ(c.pipeline[1], OpSpec::crop(80, 76, true));
  EXPECT_EQ(c.pipeline[2], OpSpec::overlay(0.25, 0.75, true).at_index(7));
  // The pool serves the overlay's stage: after the crop.
  EXPECT_EQ(c.pool.image_height, 80);
  EXPECT_EQ(c.pool.image_width, 76);
  EXPECT_EQ(c.pool.sources, std::vector<std::string>{photos()});
  EXPECT_EQ(frame_size_after(c), (std::pair<int64_t, int64_t>{80, 76}));
  EXPECT_EQ(frame_size_after(c, 1), (std::pair<int64_t, int64_t>{84, 84}));

  // The kernels accept it as is: indices default to positions, weights from alpha.
  const FrameGeometry g = frame_geometry(c);
  EXPECT_EQ(g.frame_channels, 1);
  EXPECT_EQ(g.pool_size, 16);
  const PipelineDesc desc = resolve_pipeline(c.pipeline, g, c.seed, 0);
  ASSERT_EQ(desc.n_ops, 3);
  EXPECT_EQ(desc.ops[0].index, 0u);
  EXPECT_EQ(desc.ops[1].index, 1u);
  EXPECT_EQ(desc.ops[2].index, 7u);
  EXPECT_EQ(desc.ops[2].weight_lo, 64u);
  EXPECT_EQ(desc.ops[2].weight_hi, 192u);
  EXPECT_EQ(desc.out_h, 80);
  EXPECT_EQ(desc.out_w, 76);
  // The same pipeline through its text form.
  EXPECT_EQ(format_pipeline(c.pipeline),
            format_pipeline(parse_pipeline("op=shift,pad=2,padding=zeros|op=crop,size=80x76,"
                                           "center=true|op=overlay,index=7,alpha=0.25,"
                                           "alpha_max=0.75,per_frame=true")));
}

TEST_F(ConfigText, PoolImageSizeInference) {
  // Overlay before the crop: the pool has the full frame size.
  Config c = load(
      "frames: {height: 100, width: 90}\n"
      "pipeline: [{op: overlay}, {op: crop, size: 84}]\npool: {sources: [photos]}");
  EXPECT_EQ(c.pool.image_height, 100);
  EXPECT_EQ(c.pool.image_width, 90);
  // Two overlays at the same size share the pool.
  c = load(
      "pipeline: [{op: overlay}, {op: shift}, {op: overlay, alpha: 0.1}]\n"
      "pool: {sources: [photos], image_size: 84}");
  EXPECT_EQ(c.pool.image_height, 84);
  // No overlay: nothing is inferred.
  EXPECT_EQ(load("pipeline: [{op: crop, size: 64}]").pool.image_height, 0);
  expect(
      "pipeline: [{op: crop, size: 80}, {op: overlay}]\n"
      "pool: {sources: [photos], image_size: [84, 84]}",
      "pool.image_size",
      {"84x84 does not match the 80x80 frames the overlay pipeline[1] sees",
       "use [80, 80] or leave image_size out"});
  expect(
      "frames: {height: 100, width: 100}\n"
      "pipeline: [{op: overlay}, {op: crop, size: 84}, {op: overlay}]\n"
      "pool: {sources: [photos]}",
      "pipeline[2]", {"sees 84x84 frames but pipeline[0] sees 100x100", "one pool"});
}

TEST_F(ConfigText, RelativeSourcesPreferTheWorkingDirectory) {
  const fs::path here = tmp_.path() / "cwd";
  fs::create_directories(here / "photos");
  const fs::path before = fs::current_path();
  fs::current_path(here);
  const Config from_cwd = load("pool: {sources: [photos]}");
  const Config from_base = load("pool: {sources: [../photos]}");  // cwd/../photos
  fs::current_path(tmp_.path() / "photos");
  // Not under the working directory: falls back to the base directory.
  const Config fallback = load("pool: {sources: [photos]}");
  fs::current_path(before);
  EXPECT_EQ(from_cwd.pool.sources[0], (here / "photos").string());
  EXPECT_EQ(from_base.pool.sources[0], photos());
  EXPECT_EQ(fallback.pool.sources[0], photos());
}

// ---------------------------------------------------------------- presets

// data/photos comes from scripts/fetch_photos.sh; data/ is not in git.
bool have_photos() { return fs::is_directory(kSourceDir / "data" / "photos"); }

Config load_preset(const std::string& name) {
  return load_config_file((kSourceDir / "configs" / name).string());
}

// A preset whose pool reads data/photos, or nullopt without the photos after
// checking that loading it names the missing folder and how to fetch it.
std::optional<Config> load_photo_preset(const std::string& name) {
  if (have_photos()) return load_preset(name);
  expect_error([&] { load_preset(name); }, "pool.sources[0]", {"bash scripts/fetch_photos.sh"});
  return std::nullopt;
}

void expect_resolves(const Config& c) {
  const PipelineDesc desc = resolve_pipeline(c.pipeline, frame_geometry(c), c.seed, 0);
  EXPECT_EQ(desc.n_ops, static_cast<int32_t>(c.pipeline.size()));
}

TEST(ConfigPresets, EveryPresetIsTested) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kSourceDir / "configs"))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names,
            (std::vector<std::string>{"atari.yaml", "default.yaml", "drq_shift.yaml", "rad.yaml",
                                      "rad_crop.yaml", "svea_conv.yaml", "svea_overlay.yaml"}));
}

TEST(ConfigPresets, PhotoPresets) {
  // The presets whose pool reads data/photos: a shift then an overlay.
  struct Case {
    const char* name;
    int stack;
    int channels;
    double alpha;
  };
  for (const Case& want : {Case{"default.yaml", 3, 3, 0.5}, Case{"atari.yaml", 4, 1, 0.3}}) {
    SCOPED_TRACE(want.name);
    const std::optional<Config> c = load_photo_preset(want.name);
    if (!c) continue;
    EXPECT_EQ(c->frames.stack, want.stack);
    EXPECT_EQ(c->frames.channels, want.channels);
    EXPECT_EQ(c->frames.height, 84);
    EXPECT_EQ(frame_geometry(*c).frame_channels, want.channels);
    ASSERT_EQ(c->pipeline.size(), 2u);
    EXPECT_EQ(c->pipeline[0].kind(), OpKind::kShift);
    EXPECT_EQ(c->pipeline[0].get_int("pad"), 4);
    EXPECT_EQ(c->pipeline[0].get_choice("padding"), "replicate");
    EXPECT_EQ(c->pipeline[1].kind(), OpKind::kOverlay);
    EXPECT_EQ(c->pipeline[1].get_float("alpha"), want.alpha);
    EXPECT_EQ(c->pool.size, 256);
    EXPECT_EQ(c->pool.image_height, 84);
    EXPECT_EQ(c->pool.sources, std::vector<std::string>{(kSourceDir / "data" / "photos").string()});
    EXPECT_EQ(c->pool.refresh.threads, 1);
    EXPECT_EQ(c->output.dtype, OutputDtype::kUint8);
    expect_resolves(*c);
  }
  if (!have_photos()) {
    GTEST_SKIP() << "data/photos absent (bash scripts/fetch_photos.sh); checked the error only";
  }
}

TEST(ConfigPresets, SveaOverlay) {
  const fs::path places = kSourceDir / "data" / "places365_standard";
  if (!fs::exists(places)) {
    expect_error([] { load_preset("svea_overlay.yaml"); }, "pool.sources[0]",
                 {"svea_overlay.yaml: pool.sources[0]: 'data/places365_standard' does not exist",
                  "places365standard_easyformat.tar"});
    return;
  }
  const Config c = load_preset("svea_overlay.yaml");
  ASSERT_EQ(c.pipeline.size(), 1u);
  EXPECT_EQ(c.pipeline[0].get_float("alpha"), 0.5);
  EXPECT_EQ(c.frames.stack, 3);
  EXPECT_EQ(c.frames.channels, 3);
  expect_resolves(c);
}

TEST(ConfigPresets, SveaOverlayLoadsWhenPlacesIsPresent) {
  // A copy of the preset in a tree that has the folder (empty is enough for
  // the config; the pool is what needs images).
  TempDir tmp;
  fs::create_directories(tmp.path() / "data" / "places365_standard" / "train");
  fs::create_directories(tmp.path() / "configs");
  fs::copy_file(kSourceDir / "configs" / "svea_overlay.yaml",
                tmp.path() / "configs" / "svea_overlay.yaml");
  const Config c = load_config_file((tmp.path() / "configs" / "svea_overlay.yaml").string());
  EXPECT_EQ(c.pool.sources,
            std::vector<std::string>{(tmp.path() / "data" / "places365_standard").string()});
  EXPECT_EQ(c.pool.image_height, 84);
  EXPECT_EQ(c.pool.image_width, 84);
  EXPECT_EQ(c.frames.height, 84);
  EXPECT_EQ(c.pipeline[0].kind(), OpKind::kOverlay);
  EXPECT_EQ(c.pipeline[0].get_float("alpha"), 0.5);
  expect_resolves(c);
}

TEST(ConfigPresets, DrqShift) {
  const Config c = load_preset("drq_shift.yaml");
  ASSERT_EQ(c.pipeline.size(), 1u);
  EXPECT_EQ(c.pipeline[0].kind(), OpKind::kShift);
  EXPECT_EQ(c.pipeline[0].get_int("pad"), 4);
  EXPECT_EQ(c.pipeline[0].get_choice("padding"), "replicate");
  EXPECT_TRUE(c.pool.sources.empty());
  EXPECT_EQ(frame_geometry(c).pool_size, 0);
  expect_resolves(c);
}

TEST(ConfigPresets, RadCrop) {
  const Config c = load_preset("rad_crop.yaml");
  EXPECT_EQ(c.frames.height, 100);
  EXPECT_EQ(c.frames.width, 100);
  ASSERT_EQ(c.pipeline.size(), 1u);
  EXPECT_EQ(c.pipeline[0].kind(), OpKind::kCrop);
  EXPECT_EQ(c.pipeline[0].get_size("size"), (FrameSize{84, 84}));
  EXPECT_FALSE(c.pipeline[0].get_bool("center"));
  EXPECT_EQ(frame_size_after(c), (std::pair<int64_t, int64_t>{84, 84}));
  expect_resolves(c);
}

TEST(ConfigPresets, SveaConv) {
  const Config c = load_preset("svea_conv.yaml");
  EXPECT_EQ(c.frames.stack, 3);
  EXPECT_EQ(c.frames.channels, 3);
  EXPECT_EQ(c.frames.height, 84);
  ASSERT_EQ(c.pipeline.size(), 2u);
  EXPECT_EQ(c.pipeline[0].kind(), OpKind::kShift);
  EXPECT_EQ(c.pipeline[0].get_int("pad"), 4);
  EXPECT_EQ(c.pipeline[0].get_choice("padding"), "replicate");
  EXPECT_EQ(c.pipeline[1].schema().name, "random_conv");
  EXPECT_EQ(c.pipeline[1].get_choice("init"), "normal");
  EXPECT_EQ(c.pipeline[1].get_choice("padding"), "replicate");
  EXPECT_EQ(c.pipeline[1].get_choice("activation"), "sigmoid");
  EXPECT_TRUE(c.pool.sources.empty());
  expect_resolves(c);
}

TEST(ConfigPresets, Rad) {
  const Config c = load_preset("rad.yaml");
  EXPECT_EQ(c.frames.height, 100);
  EXPECT_EQ(c.frames.width, 100);
  ASSERT_EQ(c.pipeline.size(), 5u);
  EXPECT_EQ(c.pipeline[0].kind(), OpKind::kCrop);
  EXPECT_EQ(c.pipeline[0].get_size("size"), (FrameSize{84, 84}));
  EXPECT_EQ(c.pipeline[1].schema().name, "cutout");
  EXPECT_EQ(c.pipeline[1].get_int("min"), 10);
  EXPECT_EQ(c.pipeline[1].get_int("max"), 29);  // RAD's randint(10, 30)
  EXPECT_EQ(c.pipeline[1].get_choice("fill"), "zeros");
  EXPECT_EQ(c.pipeline[2].schema().name, "flip");
  EXPECT_EQ(c.pipeline[2].get_float("p"), 0.2);
  EXPECT_EQ(c.pipeline[2].get_choice("axis"), "horizontal");
  EXPECT_EQ(c.pipeline[3].schema().name, "rotate");
  EXPECT_EQ(c.pipeline[3].get_float("p"), 0.3);
  EXPECT_EQ(c.pipeline[4].schema().name, "grayscale");
  EXPECT_EQ(c.pipeline[4].get_float("p"), 0.3);
  EXPECT_EQ(frame_size_after(c), (std::pair<int64_t, int64_t>{84, 84}));
  EXPECT_TRUE(c.pool.sources.empty());
  expect_resolves(c);
}

TEST(ConfigPresets, LoadFromAnyWorkingDirectory) {
  if (!have_photos()) GTEST_SKIP() << "data/photos absent";
  TempDir elsewhere;
  const fs::path before = fs::current_path();
  fs::current_path(elsewhere.path());
  const Config c = load_preset("default.yaml");
  fs::current_path(before);
  EXPECT_EQ(c.pool.sources, std::vector<std::string>{(kSourceDir / "data" / "photos").string()});
}

// ---------------------------------------------------------------- describe and JSON

std::vector<Config> sample_configs() {
  std::vector<Config> configs = {load_preset("drq_shift.yaml"), load_preset("rad_crop.yaml"),
                                 load_config_string("{}")};
  if (have_photos()) {
    configs.push_back(load_preset("default.yaml"));
    configs.push_back(load_preset("atari.yaml"));
  }
  configs.push_back(load_config_string(
      "device: cuda:1\nseed: 18446744073709551615\n"
      "frames: {stack: 5, channels: 1, height: 90, width: 70}\n"
      "pipeline:\n"
      "  - {op: shift, pad: 3, padding: zeros, index: 4}\n"
      "  - {op: crop, size: [64, 60], center: true}\n"
      "  - {op: overlay, alpha: 0.1, alpha_max: 0.3333333333333333, per_frame: true}\n"
      "pool:\n  size: 17\n  sources: ['" +
      kSourceDir.string() +
      "/configs', "
      "'" +
      kSourceDir.string() +
      "/configs/rad_crop.yaml']\n"
      "  refresh: {threads: 0, max_per_second: 12.5, mode: sync, per_call: 3}\n"
      "output: {dtype: float32, scale: 0.00392156862745098, bias: -0.5, reuse: false}\n"));
  return configs;
}

TEST(ConfigDescribe, RoundTripGivesAnEqualConfig) {
  for (const Config& c : sample_configs()) {
    const std::string text = describe(c);
    SCOPED_TRACE(text);
    const Config again = load_config_string(text, "<describe>");
    EXPECT_EQ(again, c);
    EXPECT_EQ(describe(again), text);
  }
}

TEST(ConfigDescribe, PrintsTheResolvedValues) {
  const Config c = sample_configs().back();
  const std::string text = describe(c);
  for (const char* part :
       {"device: cuda:1\n", "seed: 18446744073709551615\n",
        "frames: {stack: 5, channels: 1, height: 90, width: 70}\n",
        "  - {op: shift, pad: 3, padding: zeros, index: 4}\n",
        "  - {op: crop, size: [64, 60], center: true}\n",
        "  - {op: overlay, alpha: 0.1, alpha_max: 0.3333333333333333, per_frame: true, distinct: "
        "false}\n",
        "  image_size: [64, 60]\n",
        "  refresh: {threads: 0, max_per_second: 12.5, mode: sync, per_call: 3}\n",
        "output: {dtype: float32, scale: 0.00392156862745098, bias: -0.5, reuse: false}\n"})
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in:\n" << text;
}

TEST(ConfigDescribe, QuotesPathsThatNeedIt) {
  TempDir tmp;
  const fs::path odd = tmp.path() / "my photos: \"best\"";
  fs::create_directories(odd);
  const Config c = load_config_string("pool: {sources: ['" + odd.string() + "']}");
  EXPECT_EQ(c.pool.sources, std::vector<std::string>{odd.string()});
  EXPECT_EQ(load_config_string(describe(c)), c);
}

// The text the Python binding sends for a dict: json.dumps(d).
TEST(ConfigJson, JsonTextLoadsLikeTheYamlFile) {
  TempDir repo;  // a repository of its own: configs/ and photos/
  fs::create_directories(repo.path() / "data" / "photos");
  const fs::path file = repo.path() / "configs" / "default.yaml";
  fs::create_directories(file.parent_path());
  fs::copy_file(kSourceDir / "configs" / "default.yaml", file);
  const Config from_yaml = load_config_file(file.string());

  const std::string json =
      R"({"device": "cpu", "seed": 0, "frames": {"stack": 3, "channels": 3, "height": 84, )"
      R"("width": 84}, "pipeline": [{"op": "shift", "pad": 4, "padding": "replicate"}, )"
      R"({"op": "overlay", "alpha": 0.5, "alpha_max": null, "per_frame": false}], "pool": )"
      R"({"size": 256, "sources": ["data/photos"], "refresh": {"threads": 1, )"
      R"("max_per_second": 0, "mode": "async", "per_call": 8}}, "output": {"dtype": "uint8", )"
      R"("scale": 1.0, "bias": 0.0}})";
  const Config from_json = load_config_string(json, "<dict>", repo.path().string());
  EXPECT_EQ(from_json, from_yaml);
  EXPECT_EQ(from_json.origin, "<dict>");
  EXPECT_EQ(from_yaml.origin, file.string());

  // Mistakes in a dict read the same, without line numbers.
  expect_error([&] { load_config_string(R"({"pool": {"size": "big"}})", "<dict>"); }, "pool.size",
               {"<dict>: pool.size: expected an integer in 1..2147483647, got the string 'big'"});
  const ConfigError e = expect_error(
      [&] { load_config_string(R"({"pool": {"refresh": {"mode": "asnc"}}})", "<dict>"); },
      "pool.refresh.mode", {});
  EXPECT_STREQ(e.what(),
               "<dict>: pool.refresh.mode: must be one of async, sync; got 'asnc' "
               "(did you mean 'async'?)");
  // JSON booleans and ints in floats' places.
  const Config c =
      load_config_string(R"({"pipeline": [{"op": "overlay", "alpha": 1, "per_frame": true}], )"
                         R"("pool": {"sources": ["data/photos"]}})",
                         "<dict>", repo.path().string());
  EXPECT_EQ(c.pipeline[0].get_float("alpha"), 1.0);
  EXPECT_TRUE(c.pipeline[0].get_bool("per_frame"));
}

}  // namespace
}  // namespace obsaug
