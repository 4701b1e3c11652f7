// Names of enum values as a table instead of a switch:
//   constexpr NamedValue<Color> kColorNames[] = {{Color::kRed, "red"}, ...};
//   name_of(kColorNames, Color::kRed) -> "red"
// A value the table does not list gets `missing`. Lookup is linear: the
// tables are a handful of entries. Header-only, host code.
#pragma once

#include <cstddef>

namespace obsaug {

template <typename E>
struct NamedValue {
  E value;
  const char* name;
};

template <typename E, size_t N>
constexpr const char* name_of(const NamedValue<E> (&table)[N], E value,
                              const char* missing = nullptr) {
  for (const NamedValue<E>& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return missing;
}

}  // namespace obsaug
