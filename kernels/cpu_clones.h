// OBSAUG_CLONES: hot CPU loops compiled for AVX2 and for the baseline, picked
// at load time through an ifunc. Under ThreadSanitizer the resolvers would run
// before the sanitizer initialises, so that build keeps the baseline only;
// clang (the fuzzing build) does not multiversion templates.
#pragma once

#if defined(__SANITIZE_THREAD__) || defined(__clang__)
#define OBSAUG_CLONES
#else
#define OBSAUG_CLONES __attribute__((target_clones("avx2", "default")))
#endif
