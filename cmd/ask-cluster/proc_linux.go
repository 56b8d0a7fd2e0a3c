package main

import "syscall"

// sysProcAttr makes each child die with the launcher, sent deathsig then, so a crashed launcher
// (or test) leaves no replica behind, and puts it in a process group of its own, so that a
// Ctrl-C at the terminal reaches the launcher alone: it stops the children itself, in order,
// where each child taking the SIGINT on its own would look to the launcher like a replica that
// died (and be restarted).
func sysProcAttr(deathsig syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: deathsig, Setpgid: true}
}
