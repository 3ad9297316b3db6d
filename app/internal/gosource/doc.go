// Package gosource checks the repository's own Go source as a whole: no
// function longer than a screenful or two (100 lines), and no function with
// more than six positional parameters in the backends (engine/cpu,
// engine/gpu), where a struct names a kernel's or a block's parameters
// instead. Generated files and assembly are not Go written by hand and are
// left out.
//
// The package has no code of its own; its test walks the tree.
package gosource
