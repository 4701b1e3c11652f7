// The replay checkpoint format (replay/checkpoint_format.h): a version 1
// file written before the format became a table still loads, samples as the
// build that wrote it did, and is written again byte for byte; every field
// of the header, the records and the arrays round-trips; a file cut at any
// field or section boundary (or one byte into it) is refused with a message
// naming that field or section; and a file whose checksums match but whose
// priorities no update could have set, or whose dtype name is unknown, is
// refused naming the value.
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "replay/checkpoint_format.h"
#include "replay/checkpoint_io.h"
#include "replay/replay_buffer.h"

namespace obsaug {
namespace {

const std::string kVersion1Dir =
    std::string(OBSAUG_SOURCE_DIR) + "/tests/replay/data/checkpoint_v1";

std::string temp_dir(const std::string& name) {
  return ::testing::TempDir() + "obsaug_format_" + name + "_" + std::to_string(::getpid());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void remove_checkpoint(const std::string& dir) {
  std::remove((dir + "/" + checkpoint::kFileName).c_str());
  ::rmdir(dir.c_str());
}

// --- the version 1 file ---------------------------------------------------------

// tests/replay/data/checkpoint_v1 was saved by the build before the format
// tables: capacity 12, frames [1, 3, 2], stack 2, int32 actions [2], n_step
// 2, prioritized, two envs (0 and 3) through 17 steps with a termination
// and a truncation, two sample() calls and one update_priorities().
TEST(CheckpointFormat, Version1FileLoadsSamplesAndIsWrittenAgainByteForByte) {
  ReplayBuffer rb = ReplayBuffer::load(kVersion1Dir);
  const ReplayOptions& o = rb.options();
  EXPECT_EQ(o.capacity, 12);
  EXPECT_EQ(o.frame_shape, (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(o.frame_stack, 2);
  EXPECT_EQ(o.action_shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(o.action_dtype, at::kInt);
  EXPECT_EQ(o.n_step, 2);
  EXPECT_EQ(o.gamma, 0.5);
  EXPECT_TRUE(o.prioritized);
  EXPECT_EQ(o.alpha, 0.7);
  EXPECT_EQ(o.beta, 0.3);
  EXPECT_EQ(o.seed, 5u);
  EXPECT_EQ(rb.total_frames(), 34);
  EXPECT_EQ(rb.sample_calls(), 2u);
  EXPECT_EQ(rb.num_valid(), 6);

  const std::string dir = temp_dir("v1_again");
  rb.save(dir);
  EXPECT_EQ(read_file(dir + "/" + checkpoint::kFileName),
            read_file(kVersion1Dir + "/" + checkpoint::kFileName));
  remove_checkpoint(dir);

  // What the writing build's buffer drew next (recorded when the file was made).
  const ReplayBatch b = rb.sample(4);
  EXPECT_TRUE(at::equal(b.indices, at::tensor({0, 2, 4, 5}, at::kLong)));
  EXPECT_TRUE(
      at::equal(b.action, at::tensor({13, -13, 14, -14, 15, -15, 30, 1}, at::kInt).view({4, 2})));
  EXPECT_TRUE(at::equal(b.reward, at::tensor({5.0f, 5.375f, 5.75f, -1.5f})));
  EXPECT_TRUE(at::equal(b.discount, at::full({4}, 0.25f)));
  EXPECT_TRUE(at::allclose(
      b.weights, at::tensor({0.864537239074707f, 1.0f, 0.864537239074707f, 0.6864173412322998f})));
}

// --- every field round-trips ----------------------------------------------------

// Each field of a table as (name, text), for comparing headers field by field.
template <typename T>
std::string text_of(const T& v) {
  std::ostringstream out;
  out.precision(17);
  if constexpr (std::is_same_v<T, at::ScalarType>) {
    out << c10::toString(v);
  } else if constexpr (std::is_arithmetic_v<T>) {
    out << +v;
  } else {
    out << (v.counted ? "counted" : "fixed");
    for (int64_t s : v.sizes) out << " " << s;
  }
  return out.str();
}

std::vector<std::pair<std::string, std::string>> header_texts(const checkpoint::Header& h) {
  std::vector<std::pair<std::string, std::string>> out;
  checkpoint::header_fields(
      h, [&](const char* name, const auto& v) { out.emplace_back(name, text_of(v)); });
  return out;
}

TEST(CheckpointFormat, EveryFieldRoundTrips) {
  checkpoint::Header h;  // no field at its default
  ReplayOptions& o = h.options;
  o.capacity = 9;
  o.frame_shape = {2, 3, 4};
  o.frame_stack = 4;
  o.action_shape = {3, 2};
  o.action_dtype = at::kBFloat16;
  o.n_step = 3;
  o.gamma = 0.25;
  o.prioritized = true;
  o.alpha = 0.125;
  o.beta = 0.875;
  o.seed = 0x0123456789abcdefull;
  h.total_frames = 5;
  h.sample_calls = 77;
  h.max_priority = 6.5;
  const auto texts = header_texts(h);
  const auto defaults = header_texts(checkpoint::Header{});
  ASSERT_EQ(texts.size(), defaults.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_NE(texts[i].second, defaults[i].second) << texts[i].first << " is at its default";
  }

  std::vector<EpisodeRing::Slot> slots(9);
  for (int64_t s = 0; s < 5; ++s) {
    slots[s] = {s - 1, s + 1, 0.5f * s - 1, static_cast<uint8_t>(s % 2),
                static_cast<uint8_t>(s == 4)};
  }
  const std::vector<EpisodeRing::Env> envs{{4, 1}, {-1, 0}, {2, 1}};
  const std::vector<double> priorities{0.5, 1, 2, 4, 8, 0, 0, 0, 0};
  const auto long_options = at::TensorOptions().dtype(at::kLong);
  const at::Tensor actions = at::arange(9 * 6, long_options).view({9, 3, 2}).to(at::kBFloat16);
  const at::Tensor frames =
      at::arange(9 * 24, long_options).remainder(251).to(at::kByte).view({9, 2, 3, 4});

  const std::string dir = temp_dir("fields");
  write_atomically(dir, checkpoint::kFileName, [&](CheckpointWriter& w) {
    checkpoint::write_checkpoint(w, h, {slots, envs, priorities, actions, frames});
  });
  CheckpointReader r(dir + "/" + checkpoint::kFileName);
  const checkpoint::Header read = checkpoint::read_header(r);
  EXPECT_EQ(header_texts(read), texts);
  const checkpoint::Links links = checkpoint::read_links(r, read);
  ASSERT_EQ(links.slots.size(), 5u);
  for (size_t s = 0; s < 5; ++s) {
    EXPECT_EQ(links.slots[s].prev, slots[s].prev);
    EXPECT_EQ(links.slots[s].next, slots[s].next);
    EXPECT_EQ(links.slots[s].reward, slots[s].reward);
    EXPECT_EQ(links.slots[s].terminated, slots[s].terminated);
    EXPECT_EQ(links.slots[s].ended, slots[s].ended);
  }
  ASSERT_EQ(links.envs.size(), envs.size());
  for (size_t e = 0; e < envs.size(); ++e) {
    EXPECT_EQ(links.envs[e].last, envs[e].last);
    EXPECT_EQ(links.envs[e].open, envs[e].open);
  }
  std::vector<double> read_priorities(9, -1.0);
  const at::Tensor read_actions = at::zeros({9, 3, 2}, at::kBFloat16);
  const at::Tensor read_frames = at::zeros({9, 2, 3, 4}, at::kByte);
  checkpoint::read_arrays(r, read, read_priorities.data(), read_actions,
                          read_frames);  // + checksum
  EXPECT_EQ(std::vector<double>(read_priorities.begin(), read_priorities.begin() + 5),
            std::vector<double>(priorities.begin(), priorities.begin() + 5));
  EXPECT_TRUE(at::equal(read_actions.narrow(0, 0, 5), actions.narrow(0, 0, 5)));
  EXPECT_TRUE(at::equal(read_actions.narrow(0, 5, 4), at::zeros({4, 3, 2}, at::kBFloat16)));
  EXPECT_TRUE(at::equal(read_frames.narrow(0, 0, 5), frames.narrow(0, 0, 5)));
  EXPECT_TRUE(at::equal(read_frames.narrow(0, 5, 4), at::zeros({4, 2, 3, 4}, at::kByte)));
  remove_checkpoint(dir);
}

// --- truncation names the field --------------------------------------------------

// Where each field and section of `rb`'s checkpoint starts, and the name a
// message about a file ending inside it carries; worked out here from the
// layout in checkpoint_format.h, independently of the reader.
std::vector<std::pair<uint64_t, std::string>> boundaries(const ReplayBuffer& rb,
                                                         uint64_t env_count) {
  std::vector<std::pair<uint64_t, std::string>> out;
  uint64_t at = 0;
  const auto add = [&](uint64_t bytes, const std::string& name) {
    if (bytes > 0) out.emplace_back(at, name);
    at += bytes;
  };
  add(8, "the magic");
  add(4, "the format version");
  checkpoint::Header h;
  h.options = rb.options();
  h.total_frames = rb.total_frames();
  checkpoint::header_fields(h, [&](const char* name, const auto& v) {
    using T = std::decay_t<decltype(v)>;
    uint64_t bytes = 0;
    if constexpr (std::is_same_v<T, at::ScalarType>) {
      bytes = 4 + std::string(c10::toString(v)).size();
    } else if constexpr (std::is_arithmetic_v<T>) {
      bytes = std::is_same_v<T, bool> ? 1 : sizeof(T);
    } else {
      bytes = (v.counted ? 4 : 0) + 8 * v.sizes.size();
    }
    add(bytes, std::string("header field '") + name + "'");
  });
  add(8, "the header checksum");
  const ReplayOptions& o = rb.options();
  const uint64_t size = static_cast<uint64_t>(rb.size());
  uint64_t action_row = c10::elementSize(o.action_dtype);
  for (int64_t s : o.action_shape) action_row *= s;
  add(size * 22, "the slot records");  // prev i64, next i64, reward f32, terminated u8, ended u8
  add(4, "the env count");
  add(env_count * 9, "the env records");  // last i64, open u8
  add(o.prioritized ? size * 8 : 0, "the priorities");
  add(size * action_row, "the actions");
  add(size * o.frame_shape[0] * o.frame_shape[1] * o.frame_shape[2], "the frames");
  add(8, "the checksum");
  out.emplace_back(at, "");  // the end of the file
  return out;
}

TEST(CheckpointFormat, RecordSizesAreVersion1s) {
  EXPECT_EQ(checkpoint::slot_record_bytes(), 22u);
  EXPECT_EQ(checkpoint::env_record_bytes(), 9u);
}

TEST(CheckpointFormat, AFileCutAtAnyFieldIsRefusedNamingIt) {
  ReplayOptions o;
  o.capacity = 6;
  o.frame_shape = {1, 2, 3};
  o.frame_stack = 2;
  o.action_shape = {2};
  o.prioritized = true;
  ReplayBuffer rb(o);
  const at::Tensor frames = at::zeros({2, 1, 2, 3}, at::kByte);
  rb.add_first(frames);
  for (int i = 0; i < 3; ++i)
    rb.add(at::zeros({2, 2}), at::zeros({2}), frames, at::zeros({2}, at::kBool),
           at::zeros({2}, at::kBool));
  const std::string dir = temp_dir("cut");
  rb.save(dir);
  const std::string path = dir + "/" + checkpoint::kFileName;
  const std::string bytes = read_file(path);
  const auto starts = boundaries(rb, 2);
  ASSERT_EQ(starts.back().first, bytes.size()) << "the layout above misses part of the file";
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    const auto& [start, name] = starts[i];
    const uint64_t length = starts[i + 1].first - start;
    for (uint64_t cut : {start, start + length / 2}) {
      if (cut > start && length < 2) continue;
      write_file(path, bytes.substr(0, cut));
      std::string message = "loaded";
      try {
        ReplayBuffer::load(dir);
      } catch (const std::invalid_argument& e) {
        message = e.what();
      }
      EXPECT_NE(message.find("truncated: it ends inside " + name), std::string::npos)
          << "cut at byte " << cut << " of " << bytes.size() << ": " << message;
    }
  }
  write_file(path, bytes);
  EXPECT_EQ(ReplayBuffer::load(dir).total_frames(), rb.total_frames());
  remove_checkpoint(dir);
}

// --- values a checksum cannot vouch for ---------------------------------------

// Where section or field `name` of `rb`'s checkpoint starts.
uint64_t start_of(const ReplayBuffer& rb, const std::string& name) {
  for (const auto& [at, n] : boundaries(rb, 1))
    if (n == name) return at;
  ADD_FAILURE() << "no " << name << " in the layout";
  return 0;
}

// `bytes` with both checksums written again over the edit, as a writer with a
// bug (or a tool that edits the file) would leave them.
std::string resealed(std::string bytes, uint64_t header_checksum_at) {
  for (const uint64_t at : {header_checksum_at, uint64_t{bytes.size() - 8}}) {
    Checksum sum;
    sum.update(bytes.data(), at);
    const uint64_t value = sum.value();
    std::memcpy(&bytes[at], &value, sizeof value);
  }
  return bytes;
}

template <typename T>
std::string with(std::string bytes, uint64_t at, T value) {
  std::memcpy(&bytes[at], &value, sizeof value);
  return bytes;
}

std::string load_error(const std::string& dir, const std::string& bytes) {
  write_file(dir + "/" + checkpoint::kFileName, bytes);
  try {
    ReplayBuffer::load(dir);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "loaded";
}

TEST(CheckpointFormat, PrioritiesNoUpdateCouldSetAreRefusedNamingTheSlot) {
  ReplayOptions o;
  o.capacity = 8;
  o.frame_shape = {1, 2, 2};
  o.frame_stack = 2;
  o.prioritized = true;
  ReplayBuffer rb(o);
  const at::Tensor frame = at::zeros({1, 1, 2, 2}, at::kByte);
  rb.add_first(frame);
  for (int i = 0; i < 4; ++i)
    rb.add(at::zeros({1}), at::zeros({1}), frame, at::zeros({1}, at::kBool),
           at::zeros({1}, at::kBool));
  const std::string dir = temp_dir("priorities");
  rb.save(dir);
  const std::string bytes = read_file(dir + "/" + checkpoint::kFileName);
  const uint64_t header_sum = start_of(rb, "the header checksum");
  const uint64_t slot2 = start_of(rb, "the priorities") + 2 * sizeof(double);
  const uint64_t max_priority = start_of(rb, "header field 'max_priority'");
  EXPECT_EQ(load_error(dir, resealed(bytes, header_sum)), "loaded");  // the reseal alone
  for (const double bad : {-1.0, std::nan(""), HUGE_VAL, 1e308}) {
    const std::string message = load_error(dir, resealed(with(bytes, slot2, bad), header_sum));
    EXPECT_NE(message.find("the priority weight of slot 2 is "), std::string::npos)
        << bad << ": " << message;
  }
  for (const double bad : {0.0, -2.0, std::nan(""), HUGE_VAL}) {
    const std::string message =
        load_error(dir, resealed(with(bytes, max_priority, bad), header_sum));
    EXPECT_NE(message.find("max_priority "), std::string::npos) << bad << ": " << message;
  }
  remove_checkpoint(dir);
}

TEST(CheckpointFormat, AnUnknownDtypeNameIsQuotedAsPrintableText) {
  ReplayOptions o;
  o.capacity = 4;
  o.frame_shape = {1, 2, 2};
  o.frame_stack = 1;
  ReplayBuffer rb(o);
  const std::string dir = temp_dir("dtype");
  rb.save(dir);
  const std::string bytes = read_file(dir + "/" + checkpoint::kFileName);
  const uint64_t name = start_of(rb, "header field 'action_dtype'") + sizeof(uint32_t);
  ASSERT_EQ(bytes.substr(name, 5), "Float");
  std::string edited = bytes;
  edited[name] = static_cast<char>(0xc6);  // not UTF-8 on its own
  edited[name + 1] = '\\';
  const std::string message =
      load_error(dir, resealed(edited, start_of(rb, "the header checksum")));
  EXPECT_NE(message.find("unknown action dtype '\\xc6\\x5coat'"), std::string::npos) << message;
  remove_checkpoint(dir);
}

}  // namespace
}  // namespace obsaug
