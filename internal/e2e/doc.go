// Package e2e holds acphub's black-box tests: they build the real binary,
// start the hub as a process, and drive it as clients would, over
// WebSocket, through acphub attach and through acphub chat.
package e2e
