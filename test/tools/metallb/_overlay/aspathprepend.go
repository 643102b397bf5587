// This file is added to a copy of github.com/metallb/frr-k8s/api/v1beta1 v0.0.21
// that test/tools/build.sh makes in the test cache, together with the field
//
//	PrefixesWithAsPathPrepend []AsPathPrependPrefixes `json:"withAsPathPrepend,omitempty"`
//
// in Advertise. MetalLB v0.16.2 requires frr-k8s v0.0.27, which the Go module proxy
// does not serve; v0.0.21 is the newest it serves and lacks only this type. MetalLB's
// controller does not use it at run time (the speaker's FRR-K8s mode does).
// The directory name starts with "_" so that the go command never builds it as a
// package of the wrapper module.

package v1beta1

// AsPathPrependPrefixes is a list of prefixes associated to a number of AS path
// prepends.
type AsPathPrependPrefixes struct {
	// Prefixes is the list of prefixes.
	Prefixes []string `json:"prefixes,omitempty"`
	// AsPathPrepend is how many times the local AS is prepended.
	AsPathPrepend uint8 `json:"asPathPrepend,omitempty"`
}

// DeepCopyInto copies the receiver into out.
func (in *AsPathPrependPrefixes) DeepCopyInto(out *AsPathPrependPrefixes) {
	*out = *in
	if in.Prefixes != nil {
		out.Prefixes = append([]string(nil), in.Prefixes...)
	}
}

// DeepCopy returns a deep copy of the receiver.
func (in *AsPathPrependPrefixes) DeepCopy() *AsPathPrependPrefixes {
	if in == nil {
		return nil
	}
	out := new(AsPathPrependPrefixes)
	in.DeepCopyInto(out)
	return out
}
