/* go.exe for the tests under Wine (run.sh): the config tests name "go" as a
   command that is surely on PATH, and there is no Go in the Wine prefix. */
#include <stdio.h>
int main(void) {
  fputs("go.exe: a stand-in for the tests under Wine (testdata/wine/run.sh); there is no Go here\n", stderr);
  return 1;
}
