package links

import (
	"reflect"
	"testing"
)

// TestExtractLinksTreeBuilder covers the tree-construction corners ExtractFast emulates.
func TestExtractLinksTreeBuilder(t *testing.T) {
	base := mustURL(t, "http://h.example/")
	cases := []string{
		`<div><svg><g></div><a href=/after>`,
		`<p><svg><g></p><a href=/p>`,
		`<svg><desc><div></desc><a href=/x></div></svg><a href=/y>`,
		`<table><tr><td><svg><foreignObject><td><a href=/z>`,
		`<table><template><a href=/t1></template><a href=/t2></table>`,
		`<table><a href=1><tr><td><a href=2></td></tr></table>z<a href=3>`,
		`<a href=1><table><a href=2><tr><td><a href=3></table>`,
		`<table><tr><td><table><a href=1></table><a href=2></td></tr><a href=3></table>`,
		`<svg><frameset><frame src=1>`,
		`<svg></svg><frameset><frame src=1>`,
		`<svg><desc><frameset><frame src=1>`,
		`<template><frameset><frame src=1></template><frameset><frame src=2>`,
		`<head><template><a href=1></template></head><frameset><frame src=2>`,
		`<math><mi><svg><a href=1></svg><a href=2></mi></math>`,
		`<math><annotation-xml encoding="TEXT/HTML"><a href=1></annotation-xml><a href=2></math>`,
		`<svg><font color=red><a href=1>`,
		`<svg><font><a href=1>`,
		`<table><caption><a href=1><tr><a href=2></table>`,
		`<table><colgroup><a href=1><col><a href=2></table>`,
		`<select><a href=1><table><a href=2></table></select>`,
		`<table><td><a href=1><table><a href=2></table><a href=3></table><a href=4>`,
		`<table><tr><td>x</td><a href=1><tr><a href=2></table>`,
		`<table><svg><foreignObject><a href=1></svg><a href=2></table>`,
		`<table><tr><td><svg><desc><table><a href=1></table></svg><a href=2>`,
		`<svg><foreignObject><template><a href=1></template></svg><a href=2>`,
		`<body><a href=1></a><frameset><frame src=2>`,
		`<a href=1></a> <frameset><frame src=2>`,
		`<a href=1>\x00</a><frameset><frame src=2>`,
		`<input type=HIDDEN><a href=1></a><frameset><frame src=2>`,
		`<input type=text><a href=1></a><frameset><frame src=2>`,
		`<base href=/b1/><a href=1></a><frameset><frame src=2>`,
		`<table><tr><td><base href=/b1/></td><base href=/b2/></table><a href=x>`,
		`<script/><a href=1>`,
		`<title/><a href=1></title><a href=2>`,
		`<svg><title/><a href=1>`,
		`<svg><script><a href=1></script></svg><a href=2>`,
		`<table><tr><td></td></tr>text<a href=1></table>`,
		`<frameset><frameset></frameset><frame src=1></frameset><frame src=2>`,
		`<table><form><a href=1></form></table>`,
		`<table><input type=hidden><a href=1></table>`,
		`<ruby><rt><a href=1></ruby>`,
		`<svg><a href=1><foreignObject><a href=2></foreignObject></a></svg>`,
		`<table><tr><th><a href=1><caption><a href=2></table>`,
		`<b><table><a href=1><tr><td><a href=2></b><a href=3></table>`,
		`<table><tbody><a href=1><tr><td></tbody><a href=2></table>`,
		`<math><mtext><table><a href=1></table></mtext></math>`,
		`<table><math><mi><a href=1></math><a href=2>`,
		`<noframes><a href=1></noframes><a href=2>`,
		`<frameset><noframes><a href=1></noframes><frame src=2></frameset><noframes><a href=3></noframes>`,
		`<iframe src=1><svg><a href=2></iframe>`,
		`<svg><![CDATA[<a href=1>]]><a href=2></svg><a href=3>`,
		`<table><div><template><a href=1></template></div><a href=2></table>`,
		`<table><a href=0><template><a href=1></template><a href=2></table>`,
		`<table><div></div><template><a href=1></template><a href=2></table>`,
		`<table><div><tr><template><a href=1></template><a href=2></table>`,
		`<table><div><template><table><a href=1></table><a href=2></template><a href=3></table><a href=4>`,
		`<link rel=next href=1><frameset><frame src=2><link rel=next href=3>`,
		`<body><link rel=next href=1><script src=2></script><frameset><frame src=3>`,
		`<body><img src=1><frameset><frame src=2>`,
		`<table><link rel=index href=1><script src=2></script><tr><td><script src=3></script></table>`,
		`<table><input type=image src=1><input type=hidden src=2></table>`,
		`<table><tr><td>x</td><img src=1 srcset="2 1x,3"><source src=4></table>`,
		`<svg><img src=1><script src=2></script></svg><script src=3></script>`,
		`<svg><foreignObject><script src=1></script><link rel=next href=2></foreignObject></svg>`,
		`<math><mi><img src=1></mi><link rel=next href=2></math>`,
		`<template><link rel=search href=1><script src=2></script></template><link rel=index href=3>`,
		`<head><template><link rel=next href=1></template></head><frameset><frame src=2>`,
		`<select><img src=1><input type=image src=2></select><image src=3>`,
		`<svg><image src=1></svg><image src=2>`,
		`<meta http-equiv=refresh content="0;url=1"><frameset><meta http-equiv=refresh content="0;url=2">`,
		`<body><meta http-equiv=refresh content="0;url=1"><frameset><frame src=2>`,
		`<link rel=canonical href=1><link rel="canonical next" href=2><a href=1>`,
		`<link rel=stylesheet href=1><a href=1 rel=nofollow><img src=2><a href=2>`,
		`<video poster=1><source src=2 srcset=3></video><object data=4><embed src=5></object>`,
	}
	for _, c := range cases {
		s := Extract(base, []byte(c))
		f := ExtractFast(base, []byte(c))
		if !reflect.DeepEqual(s, f) {
			t.Errorf("%s\ngoquery:\n%sfast:\n%s", c, pageString(s), pageString(f))
		}
	}
}
