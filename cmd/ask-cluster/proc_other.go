//go:build !linux

package main

import "syscall"

func sysProcAttr(syscall.Signal) *syscall.SysProcAttr { return nil }
