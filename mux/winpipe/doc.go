// Package winpipe serves a Windows named pipe that a client reaches on
// every platform Windows programs run on, Wine included: the textbook
// listener (an instance always waits in ConnectNamedPipe), where winio's
// keeps a first instance it never accepts on, which Wine lets a client
// connect to and wait forever. Clients dial with winio.DialPipe.
//
// It is empty but on Windows.
package winpipe
