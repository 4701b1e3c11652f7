// A saved replay checkpoint as bytes that a test, or the structure-aware
// fuzzer (tests/fuzz/fuzz_replay_fields.cpp), edits by field name and then
// reseals: both checksums (the header's and the file's) recomputed, so that
// what the edit meets is the loader's validation after the checksums, as a
// file from a buggy writer or a hand-edited one would. The layout is read
// from the file's own header through checkpoint_format.h's field tables
// (the one description of the format), not from a buffer.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "replay/checkpoint_format.h"
#include "replay/checkpoint_io.h"

namespace obsaug::testing {

class CheckpointEdit {
 public:
  // `bytes`: a whole file as ReplayBuffer::save writes it.
  explicit CheckpointEdit(std::string bytes) : bytes_(std::move(bytes)) { parse(); }
  static CheckpointEdit of_dir(const std::string& dir) {
    std::ifstream in(dir + "/" + checkpoint::kFileName, std::ios::binary);
    return CheckpointEdit(std::string(std::istreambuf_iterator<char>(in), {}));
  }

  // Where each value starts. Header fields by their table name
  // ("total_frames"); slot and env record fields by theirs ("prev", "open");
  // sections by their loader name ("the env count", "the priorities",
  // "the actions", "the frames", "the checksum").
  uint64_t header_field(const std::string& name) const { return find(header_, name); }
  uint64_t slot_field(int64_t slot, const std::string& name) const {
    return slots_at_ + static_cast<uint64_t>(slot) * checkpoint::slot_record_bytes() +
           find(slot_offsets_, name);
  }
  uint64_t env_field(int64_t env, const std::string& name) const {
    return envs_at_ + static_cast<uint64_t>(env) * checkpoint::env_record_bytes() +
           find(env_offsets_, name);
  }
  uint64_t section(const std::string& name) const { return find(sections_, name); }
  uint64_t header_checksum_at() const { return header_end_; }

  const checkpoint::Header& header() const { return h_; }  // as saved
  int64_t slots() const { return checkpoint::stored_frames(h_); }
  int64_t envs() const { return env_count_; }
  uint64_t action_row_bytes() const { return action_row_; }
  std::string& bytes() { return bytes_; }
  const std::string& bytes() const { return bytes_; }

  template <typename T>
  T get(uint64_t at) const {
    static_assert(std::is_trivially_copyable_v<T>, "a plain value");
    if (at + sizeof(T) > bytes_.size()) throw std::out_of_range("CheckpointEdit: past the end");
    T v;
    std::memcpy(&v, bytes_.data() + at, sizeof(T));
    return v;
  }
  template <typename T>
  CheckpointEdit& set(uint64_t at, T value) {
    static_assert(std::is_trivially_copyable_v<T>, "a plain value");
    if (at + sizeof(T) > bytes_.size()) throw std::out_of_range("CheckpointEdit: past the end");
    std::memcpy(&bytes_[at], &value, sizeof(T));
    return *this;
  }
  // The field's own type: the caller names it (int64_t for prev/next/last,
  // float for reward, uint8_t for the flags; header fields as ReplayOptions).
  template <typename T>
  CheckpointEdit& set_header(const std::string& name, T v) {
    return set(header_field(name), v);
  }
  template <typename T>
  CheckpointEdit& set_slot(int64_t slot, const std::string& name, T v) {
    return set(slot_field(slot, name), v);
  }
  template <typename T>
  CheckpointEdit& set_env(int64_t env, const std::string& name, T v) {
    return set(env_field(env, name), v);
  }

  // The bytes with both checksums written over what they hold now.
  std::string sealed() const {
    std::string out = bytes_;
    for (const uint64_t at : {header_end_, uint64_t{out.size() - sizeof(uint64_t)}}) {
      Checksum sum;
      sum.update(out.data(), at);
      const uint64_t value = sum.value();
      std::memcpy(&out[at], &value, sizeof value);
    }
    return out;
  }
  void write_sealed(const std::string& dir) const {
    std::ofstream out(dir + "/" + checkpoint::kFileName, std::ios::binary | std::ios::trunc);
    const std::string s = sealed();
    out.write(s.data(), static_cast<std::streamsize>(s.size()));
  }

 private:
  static uint64_t find(const std::map<std::string, uint64_t>& m, const std::string& name) {
    const auto it = m.find(name);
    if (it == m.end()) throw std::invalid_argument("CheckpointEdit: no field " + name);
    return it->second;
  }

  // Walks the header's field table over the bytes (as the reader would,
  // without its checks: the file is one save() wrote).
  void parse() {
    uint64_t at = sizeof(checkpoint::kMagic) + sizeof(uint32_t);
    checkpoint::header_fields(h_, [&](const char* name, auto&& v) {
      using T = std::decay_t<decltype(v)>;
      header_[name] = at;
      if constexpr (std::is_same_v<T, bool>) {
        v = get<uint8_t>(at) != 0;
        at += 1;
      } else if constexpr (std::is_arithmetic_v<T>) {
        v = get<T>(at);
        at += sizeof(T);
      } else if constexpr (std::is_same_v<T, at::ScalarType>) {
        const uint32_t length = get<uint32_t>(at);
        const std::string dtype = bytes_.substr(at + 4, length);
        for (at::ScalarType t : kActionDtypes)
          if (dtype == c10::toString(t)) v = t;
        at += 4 + length;
      } else {
        uint32_t count = v.max;
        if (v.counted) {
          count = get<uint32_t>(at);
          at += 4;
        }
        v.sizes.resize(count);
        for (int64_t& s : v.sizes) {
          s = get<int64_t>(at);
          at += 8;
        }
      }
    });
    header_end_ = at;
    const uint64_t size = static_cast<uint64_t>(checkpoint::stored_frames(h_));
    const ReplayOptions& o = h_.options;
    action_row_ = c10::elementSize(o.action_dtype);
    for (int64_t s : o.action_shape) action_row_ *= static_cast<uint64_t>(s);
    uint64_t frame = 1;
    for (int64_t s : o.frame_shape) frame *= static_cast<uint64_t>(s);
    at += sizeof(uint64_t);
    slots_at_ = at;
    at += size * checkpoint::slot_record_bytes();
    sections_["the env count"] = at;
    env_count_ = get<uint32_t>(at);
    at += 4;
    envs_at_ = at;
    at += static_cast<uint64_t>(env_count_) * checkpoint::env_record_bytes();
    sections_["the priorities"] = at;
    at += o.prioritized ? size * sizeof(double) : 0;
    sections_["the actions"] = at;
    at += size * action_row_;
    sections_["the frames"] = at;
    at += size * frame;
    sections_["the checksum"] = at;
    if (at + sizeof(uint64_t) != bytes_.size())
      throw std::invalid_argument("CheckpointEdit: not a file save() wrote");
    const auto offsets = [](auto record, auto table, std::map<std::string, uint64_t>* out) {
      uint64_t offset = 0;
      table(record, [&](const char* name, const auto& v) {
        (*out)[name] = offset;
        offset += sizeof(v);
      });
    };
    offsets(
        EpisodeRing::Slot{}, [](auto& s, auto&& f) { checkpoint::slot_fields(s, f); },
        &slot_offsets_);
    offsets(
        EpisodeRing::Env{}, [](auto& e, auto&& f) { checkpoint::env_fields(e, f); }, &env_offsets_);
  }

  std::string bytes_;
  checkpoint::Header h_;
  std::map<std::string, uint64_t> header_, slot_offsets_, env_offsets_, sections_;
  uint64_t header_end_ = 0, slots_at_ = 0, envs_at_ = 0, action_row_ = 0;
  int64_t env_count_ = 0;
};

}  // namespace obsaug::testing
