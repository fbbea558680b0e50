package params

// declared is the encoding the module serves (kept alive for the export).
var declared []byte

// Declare declares the policy's parameters (call it once, in an init
// function). The declarations are checked by the host when it loads the
// module: a name twice, an unknown type or a default outside its bounds
// refuses the module (policy push exits 2 naming it).
func Declare(ps ...Param) { declared = Encode(ps) }

// Declared returns what Declare declared (for a plugin's native tests: the
// host reads the same through the module's export).
func Declared() ([]Param, error) { return Decode(declared) }
