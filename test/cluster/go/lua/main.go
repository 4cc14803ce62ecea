// Runs a Lua file on gopher-lua, the Lua VM Argo CD embeds for resource actions and health checks,
// so the unit-level checks of our resource action run the same VM as production
// (test/argocd/lua.ts). Usage: gopher-lua FILE. What the script writes goes to stdout; a Lua error
// goes to stderr with exit status 1.
package main

import (
	"fmt"
	"os"

	lua "github.com/yuin/gopher-lua"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gopher-lua FILE")
		os.Exit(2)
	}
	L := lua.NewState()
	err := L.DoFile(os.Args[1])
	L.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
