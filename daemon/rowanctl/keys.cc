#include "keys.h"

#include <sys/stat.h>
#include <unistd.h>

#include <exception>
#include <iterator>
#include <string>

#include "crypto/keys.h"

namespace rowan::ctl {

int run_genkey(std::ostream& out, std::ostream& err) {
  struct stat st {};
  if (fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode) &&
      (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    err << "rowanctl: warning: writing a private key to a file that group or others can read "
           "(use umask 077); rowand will refuse it\n";
  }
  try {
    crypto::Key k = crypto::generate_private_key();
    out << crypto::key_to_base64(k) << "\n";
    crypto::wipe(k);
  } catch (const std::exception& e) {
    err << "rowanctl: " << e.what() << "\n";
    return 1;
  }
  return out.good() ? 0 : 1;
}

int run_pubkey(std::istream& in, std::ostream& out, std::ostream& err) {
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto k = crypto::key_from_base64(text);
  crypto::wipe({reinterpret_cast<uint8_t*>(text.data()), text.size()});
  if (!k) {
    err << "rowanctl: pubkey: stdin is not a private key (44 base64 characters, as written by "
           "`rowanctl genkey`)\n";
    return 1;
  }
  try {
    out << crypto::key_to_base64(crypto::public_key(*k)) << "\n";
  } catch (const std::exception& e) {
    err << "rowanctl: pubkey: " << e.what() << "\n";
    crypto::wipe(*k);
    return 1;
  }
  crypto::wipe(*k);
  return out.good() ? 0 : 1;
}

}  // namespace rowan::ctl
