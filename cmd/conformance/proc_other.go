//go:build !linux

package main

import "syscall"

func nginxProcAttr() *syscall.SysProcAttr { return nil }
