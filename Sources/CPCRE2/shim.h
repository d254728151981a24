// PCRE2's 8-bit library, the matcher of journal watches' `grep` patterns (the one `journalctl --grep` uses).
// Its function names are macros over the code unit width, which Swift does not import: the `_8` names are called.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
