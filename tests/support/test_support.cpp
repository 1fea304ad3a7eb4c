#include "tests/support/test_support.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace thrive::test {

TempDir::TempDir() {
  std::string tmpl = "/tmp/thrive-test-XXXXXX";
  char* made = mkdtemp(tmpl.data());
  path_ = made ? made : "/tmp/thrive-test-fallback";
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ec);
  std::filesystem::remove_all(path_, ec);
}

config::Config fast_config(const std::string& home) {
  config::Config c;
  c.home = home;
  c.bench_max_s = 0.05;
  c.bench_min_reps = 5;
  c.bench_noise = 0.05;
  c.candidate_timeout_s = 60.0;
  c.peak_bw_gbps = 0.0;
  return c;
}

config::ModelDims small_model() {
  config::ModelDims m;
  m.hidden = 256;
  m.intermediate = 384;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 64;
  m.vocab = 3000;
  m.max_position = 2048;
  return m;
}

CommandResult run_thrive(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  TempDir io;
  const std::string out_path = io.path() + "/out", err_path = io.path() + "/err";
  pid_t pid = fork();
  if (pid == 0) {
    for (const auto& e : env) putenv(strdup(e.c_str()));
    FILE* o = freopen(out_path.c_str(), "w", stdout);
    FILE* e = freopen(err_path.c_str(), "w", stderr);
    (void)o;
    (void)e;
    std::vector<char*> argv = {const_cast<char*>(THRIVE_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(THRIVE_BINARY, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

std::string kernel_text(const std::string& op, const std::string& body) {
  return "// @thrive op: " + op + "\n// @thrive backend: cpu\n// @thrive entry: k\n"
         "#include \"thrive_cpu.h\"\n#include <math.h>\n"
         "THRIVE_EXPORT int k(const ThriveArgs* a) {\n" + body + "\n}\n";
}

}  // namespace thrive::test
