package template_test

import (
	"fmt"
	"slices"

	"github.com/nodejoin/nodejoin/internal/localaws/cloudformation/template"
)

// A stack engine's use of the package: parse and validate the template, bind the
// request's parameters, evaluate conditions, then make each resource in Order (those
// whose condition holds) with its evaluated properties, and finally the outputs.
func Example() {
	body := []byte(`
Parameters:
  Env: {Type: String, AllowedValues: [dev, prod]}
Conditions:
  IsProd: !Equals [!Ref Env, prod]
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      Path: !Sub /${AWS::StackName}/
  Profile:
    Type: AWS::IAM::InstanceProfile
    Properties:
      Roles: [!Ref Role]
      Path: !If [IsProd, /prod/, !Ref "AWS::NoValue"]
Outputs:
  ProfileArn: {Value: !GetAtt Profile.Arn, Export: {Name: !Sub "${AWS::StackName}-profile"}}
`)
	tmpl, err := template.Parse(body)
	if err != nil {
		panic(err)
	}
	supported := []string{"AWS::IAM::InstanceProfile", "AWS::IAM::Role"}
	if err := tmpl.Validate(func(typ string) bool { return slices.Contains(supported, typ) }); err != nil {
		panic(err)
	}
	params, err := tmpl.BindParameters(map[string]string{"Env": "dev"}, nil)
	if err != nil {
		panic(err)
	}
	made := map[string]string{}
	env := &template.Env{
		Parameters: params, AccountID: "123456789012", Region: "us-west-2", StackName: "demo",
		Resource: func(id string) (string, map[string]string, bool) {
			ref, ok := made[id]
			return ref, map[string]string{"Arn": "arn:aws:iam::123456789012:" + ref}, ok
		},
	}
	if env.Conditions, err = tmpl.EvalConditions(env); err != nil {
		panic(err)
	}
	for _, id := range tmpl.Order() {
		if c := tmpl.Resources[id].Condition; c != "" && !env.Conditions[c] {
			continue
		}
		props, _, _, err := tmpl.EvalResource(id, env)
		if err != nil {
			panic(err)
		}
		fmt.Println(id, props)
		made[id] = "demo-" + id
	}
	outputs, err := tmpl.EvalOutputs(env)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", outputs)
	fmt.Println(tmpl.Summary().Capabilities)
	// Output:
	// Role map[Path:/demo/]
	// Profile map[Roles:[demo-Role]]
	// [{Key:ProfileArn Value:arn:aws:iam::123456789012:demo-Profile Description: ExportName:demo-profile}]
	// [CAPABILITY_IAM]
}
