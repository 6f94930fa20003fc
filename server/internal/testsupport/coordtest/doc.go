// Package coordtest holds the coordination SDK's tests that need real
// servers (in-process 1- and 3-node clusters from testcluster): sessions,
// semaphores, watches and the recipes across leader changes. They live in
// the server module so that the coordination package, in the client
// module, needs nothing but the standard library.
package coordtest
