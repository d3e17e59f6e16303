// The `vllm serve` command line on moeserve: the spellings vLLM's argument parser accepts, its
// size suffixes, and what happens to the vLLM flags moeserve does not implement. The table of
// those flags (vllm_compat.cc) is the one place that decides, for each, whether it is ignored with
// a warning (it has no meaning on CPUs or cannot change a result here) or refused (honouring it
// would change results, and silently dropping it would mislead). README's table follows it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace moeserve::apps {

// Rewrites argv (without argv[0]) as vLLM's FlexibleArgumentParser reads it, for every command:
// `--max_model_len[=v]` -> `--max-model-len[=v]` (only the name part; values are kept as given),
// and vLLM's single-dash long names (-tp, -pp, -dp, -q) to their long spellings, which CLI11
// would otherwise read as clusters of one-letter flags.
void NormalizeVllmArgs(std::vector<std::string>& args);

// vLLM's human_readable_int: a plain integer, or a number with a suffix: k, m, g, t are powers of
// 1000 and may have decimals ("25.6k" = 25600); K, M, G, T are powers of 1024 and must be
// integers ("32K" = 32768). Throws moeserve::Error on anything else.
uint64_t ParseHumanReadableInt(const std::string& text);
// CLI11 transform for token-count flags: rewrites such a value to its decimal integer. With
// `auto_is_zero`, "auto" and "-1" (vLLM's "derive it from the model") become 0.
CLI::Validator HumanReadableInt(bool auto_is_zero = false);

// A vLLM flag moeserve does not implement.
struct VllmFlag {
  std::string name;  // long spelling, e.g. "--dtype"
  bool refused;      // always refused (else ignored, when harmless)
  bool takes_value;
  // For a flag with a value: the values that ask for what moeserve does anyway ("|"-separated;
  // "*" = any value, "=model" = the --model folder); any other value is refused.
  std::string harmless_values;
  std::string why;  // shown when refused, and in --help
};

// Every vLLM flag that moeserve accepts without implementing it, or refuses by name.
const std::vector<VllmFlag>& VllmFlags();

// Registers VllmFlags() on a command and, after parsing, warns about or refuses the ones given.
class VllmFlagSet {
 public:
  void AddTo(CLI::App& app);
  // Throws moeserve::Error naming the first flag given with a value that would change results;
  // otherwise logs one warning line naming every ignored flag given (none when none was).
  // Returns that line ("" when nothing was ignored).
  std::string Check(const std::string& model_dir) const;

 private:
  struct Given {
    const VllmFlag* flag;
    CLI::Option* option;
    std::string value;
  };
  std::vector<Given> given_;  // stable addresses: reserved before options bind to `value`
};

// `--chat-template` as vLLM reads it: the name of a readable file is read; otherwise a value that
// contains any of "{", "}" or a newline is the template itself; anything else is an error that
// says the file could not be opened.
std::string ResolveChatTemplate(const std::string& value);

}  // namespace moeserve::apps
