// tools/args: the CLI's option parsing, and the usage errors (exit status 2)
// for each kind of mistake, naming the option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/args.h"

namespace obsaug::cli {
namespace {

// argv as main() gets it: "obsaug", the subcommand, then `rest`.
Args parse(std::vector<std::string> rest, const std::set<std::string>& valued = {"config", "batch"},
           const std::set<std::string>& bare = {"inplace"}) {
  std::vector<std::string> words{"obsaug", "bench"};
  words.insert(words.end(), rest.begin(), rest.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return parse_args("bench", static_cast<int>(argv.size()), argv.data(), 2, valued, bare);
}

std::string usage_error(std::vector<std::string> rest) {
  try {
    parse(std::move(rest));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "parsed";
}

TEST(Args, ValuesFlagsAndPositionals) {
  const Args a = parse({"--config", "a.yaml", "--batch=8", "--inplace", "extra", "--help"});
  EXPECT_EQ(a.get("config"), "a.yaml");
  EXPECT_EQ(a.get_int("batch", 256, 1), 8);
  EXPECT_TRUE(a.has("inplace"));
  EXPECT_TRUE(a.has("help"));
  EXPECT_FALSE(a.has("samples"));
  EXPECT_EQ(a.positional, std::vector<std::string>{"extra"});
  EXPECT_EQ(a.get("samples", "none"), "none");
}

TEST(Args, IntegersAcceptExponentsAndRefuseTheRest) {
  EXPECT_EQ(parse({"--batch", "1e7"}).get_int("batch", 0, 1), 10000000);
  EXPECT_EQ(parse({"--batch", "10e6"}).get_int("batch", 0, 1), 10000000);
  EXPECT_EQ(parse({}).get_int("batch", 256, 1), 256);
  EXPECT_EQ(parse({"--batch", "2.5e6"}).get_int("batch", 0, 1), 2500000);
  EXPECT_EQ(parse({"--batch", "9223372036854775807"}).get_int("batch", 0, 1), INT64_MAX);
  for (const char* bad : {"0", "-3", "1.5", "eight", "", "1e30", "99999999999999999999", "0x10",
                          "inf", "nan", "-1e30", "+5", " 5", "5 ", "1e", "1.e3", "1e-3"}) {
    try {
      parse({"--batch", bad}).get_int("batch", 256, 1);
      ADD_FAILURE() << "accepted --batch " << bad;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--batch: expected an integer >= 1, got '") + bad + "'");
    }
  }
}

TEST(Args, IntegersStayInTheirRange) {
  EXPECT_EQ(parse({"--batch", "1024"}).get_int("batch", 1, 1, 1024), 1024);
  for (const char* bad : {"1025", "4294967297", "2147483648"}) {
    try {
      parse({"--batch", bad}).get_int("batch", 1, 1, 1024);
      ADD_FAILURE() << "accepted --batch " << bad;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--batch: expected an integer in 1..1024, got '") + bad + "'");
    }
  }
}

TEST(Args, Unsigned64BitValues) {
  EXPECT_EQ(parse({"--batch", "18446744073709551615"}).get_uint64("batch", 0), UINT64_MAX);
  EXPECT_EQ(parse({}).get_uint64("batch", 7), 7u);
  for (const char* bad : {"18446744073709551616", "-1", "1e3", "0x10", ""}) {
    try {
      parse({"--batch", bad}).get_uint64("batch", 0);
      ADD_FAILURE() << "accepted --batch " << bad;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--batch: expected an integer in 0..18446744073709551615, got '") +
                    bad + "'");
    }
  }
}

TEST(Args, MistakesNameTheOption) {
  EXPECT_EQ(usage_error({"--bacth", "8"}),
            "bench: unknown option '--bacth' (known: --batch --config --inplace)");
  EXPECT_EQ(usage_error({"--batch"}), "--batch needs a value");
  EXPECT_EQ(usage_error({"--inplace=yes"}), "--inplace takes no value");
  EXPECT_EQ(usage_error({"--batch", "50", "--batch=4"}),
            "--batch given twice ('50', then '4'); give it once");
  EXPECT_EQ(usage_error({"--inplace", "--inplace"}), "--inplace given twice; give it once");
}

TEST(Args, AnOptionIsNotTakenForTheValueOfAnother) {
  EXPECT_EQ(usage_error({"--config", "--batch", "4"}),
            "--config needs a value, but the next argument is the option --batch");
  EXPECT_EQ(usage_error({"--batch", "--inplace"}),
            "--batch needs a value, but the next argument is the option --inplace");
  // Written with '=', any text is the value.
  EXPECT_EQ(parse({"--config=--odd.yaml"}).get("config"), "--odd.yaml");
}

TEST(Args, ConfigFromTheOptionOrTheOnePositional) {
  EXPECT_EQ(required_config("bench", parse({"--config", "a.yaml"})), "a.yaml");
  EXPECT_EQ(required_config("bench", parse({"b.yaml"})), "b.yaml");
  try {
    required_config("bench", parse({}));
    ADD_FAILURE() << "no config accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "bench: --config FILE is required");
  }
  try {
    required_config("bench", parse({"--config", "a.yaml", "b.yaml"}));
    ADD_FAILURE() << "a stray argument accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "bench: unexpected argument 'b.yaml' (the config is already --config a.yaml)");
  }
}

// The message names the extra argument, not the config before it.
TEST(Args, ASecondConfigIsNamed) {
  try {
    required_config("bench", parse({"drq_shift", "extra.yaml"}));
    ADD_FAILURE() << "two configs accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "bench: unexpected argument 'extra.yaml' (the config is already 'drq_shift')");
  }
}

TEST(Args, AnEmptyConfigSaysSo) {
  for (const std::vector<std::string>& rest :
       {std::vector<std::string>{"--config="}, std::vector<std::string>{"--config", ""}}) {
    try {
      required_config("bench", parse(rest));
      ADD_FAILURE() << "an empty --config accepted";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()),
                "bench: --config is empty; give a YAML file or a preset name");
    }
  }
}

}  // namespace
}  // namespace obsaug::cli
