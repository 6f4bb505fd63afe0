package userdata

// Helpers of the package's own tests, for its external tests (property, CloudFormation).
var (
	CheckGolden = checkGolden
	Int32Ptr    = ptr[int32]
)
