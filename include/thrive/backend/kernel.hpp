// A candidate kernel: source plus the metadata THRIVE needs to build and run it.
//
// File format (docs/kernel-format.md): any source file whose header comments carry
//   // @thrive op: <op name>
//   // @thrive backend: cpu | cuda
//   // @thrive entry: <exported symbol>            (one per entry point; cpu: exactly one)
//   // @thrive launch: entry=<e> block=<n> grid=<x>,<y>,<z> smem=<bytes>   (cuda only)
//   // @thrive params: NAME=value NAME=value     (strategy values, informational)
// Templates (kernels/<backend>/<op>/*.cpp) also declare their strategy space:
//   // @thrive param <NAME> values=<v1>,<v2>,... default=<v> [doc=<words to end of line>]
// and read each parameter as a macro with a fallback (#ifndef NAME / #define NAME v).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace thrive::backend {

/// One declared template parameter: allowed values in order, and the default.
struct ParamSpec {
  std::string name;
  std::vector<std::string> values;
  std::string default_value;
  std::string doc;
};

/// Parameter name -> value (as written in the source, e.g. "16").
using Params = std::map<std::string, std::string>;

/// Formats params canonically: "NAME1=v1,NAME2=v2" (sorted by name); "" when empty.
std::string params_to_string(const Params& params);

/// One launch of a CUDA launch plan. block, grid and smem are integer expressions
/// (see launch_expr.hpp) over shape symbols, template params and SMS, e.g.
/// grid "cdiv(T,ROWS)". Unused by the CPU backend.
struct LaunchSpec {
  std::string entry;
  std::string block = "1";
  std::string grid[3] = {"1", "1", "1"};
  std::string smem = "0";     ///< dynamic shared memory, bytes
};

/// Why a kernel's source may not be compiled as it stands, or "" when it may: its include
/// directives. A kernel is untrusted text (an agent's or an imported one), and a compiler reads any
/// file an #include names and quotes it in the compile log that goes back to the agent, so:
///   - every #include names a header by name, <name> or "name" (letters, digits, '_', '-', '+'
///     and '.', not starting with '.'), with `subdirs` a relative path of such names joined by
///     '/' (<sys/mman.h>; no absolute path, no empty, "." or ".." part), which only THRIVE's and
///     the compiler's own include directories then provide. The CPU backend passes true and
///     also checks the preprocessor's own list of the files it read (CpuBackend::compile); the
///     CUDA backend (NVRTC, whose headers THRIVE provides) passes false;
///   - #include_next, #import, #embed, a computed #include (#include MACRO) and the operators
///     __has_include, __has_include_next and __has_embed are refused.
/// The scan follows the translation phases that could hide a directive: line splices
/// (backslash-newline) are joined, comments removed (string, character and raw string literals
/// kept whole), and the digraph %: read as #. The answer names the line (1-based, of `source`)
/// and the directive, e.g. `line 3: #include "/etc/passwd": ...`. Backends call this before
/// compiling (CpuBackend also checks the compiler's assembly output for assembler directives
/// that read files, CpuBackend::compile).
std::string include_policy_violation(const std::string& source, bool subdirs);

/// Why a CPU kernel's assembly (the compiler's -S output for an untrusted source) may not be
/// assembled, or "" when it may: the GNU assembler directives that read files (.incbin,
/// .include) or could spell them (.macro, .altmacro, .purgem, .irp, .irpc, .irep, .irepc, .rept,
/// .rep, .mri), found case-insensitively
/// anywhere (GAS drops /* */ comments before reading a statement; a string holding one of the
/// words is refused as well, a false refusal accepted for that). A source can put
/// them there without an asm statement: GCC writes section and symbol names as they are spelled.
/// The answer names the assembly line (1-based) and the directive.
std::string assembly_policy_violation(const std::string& assembly);

/// A parsed kernel: what `thrive verify --kernel FILE` reads and agents produce.
struct KernelSource {
  std::string op;
  std::string backend;                ///< "cpu" or "cuda"
  std::vector<std::string> entries;   ///< exported symbols, in call order
  std::vector<LaunchSpec> launches;   ///< cuda launch plan
  Params params;                      ///< strategy values that produced it
  std::vector<ParamSpec> param_specs; ///< declared strategy space (templates only)
  std::string source;                 ///< the full file text

  /// Parses the header comments of `text`. Throws Error(kInput) naming `origin`
  /// and the problem: no `@thrive op`, no entry, unknown backend, malformed line.
  static KernelSource parse(const std::string& text, const std::string& origin);

  /// Instantiates a template with `values` (missing ones take their default):
  /// returns a kernel whose source starts with the header lines and #defines.
  /// Throws Error(kInput) for an undeclared parameter or a value outside `values`.
  KernelSource instantiate(const Params& values) const;

  /// Parameter values with defaults filled in.
  Params defaults() const;

  /// Every parameter at the first value its `values=` list declares: by the templates'
  /// convention the simplest variant (scalar accesses, smallest blocks, no splitting, no
  /// caching). A cold start with no tuning baked in: the CUDA templates' defaults are the
  /// winners of earlier H200 searches, the CPU templates' defaults are already these values.
  Params simplest() const;

  /// 16 hex digits of a 64-bit FNV-1a hash of the source text.
  std::string content_hash() const;
};

}  // namespace thrive::backend
