/*
 * The US PC keyboard as keysyms: printable ASCII by character, every other
 * key by its X keysym (keysymdef.h).  Scancodes are the IBM PC XT set 1 make
 * codes; E0-prefixed keys carry 0x80 (QEMU's qnum).
 */
#include "lib/keymap.h"

#include <stddef.h>
#include <string.h>

#define OFF KEYMAP_SHIFT_OFF
#define ON  KEYMAP_SHIFT_ON
#define ANY KEYMAP_SHIFT_ANY

/* Printable ASCII 0x20..0x7e: the key and the Shift state it needs. */
static const struct keymap_key ascii_keys[0x7f - 0x20] = {
    [' ' - 0x20] = {0x39, ANY}, ['!' - 0x20] = {0x02, ON},   ['"' - 0x20] = {0x28, ON},
    ['#' - 0x20] = {0x04, ON},  ['$' - 0x20] = {0x05, ON},   ['%' - 0x20] = {0x06, ON},
    ['&' - 0x20] = {0x08, ON},  ['\'' - 0x20] = {0x28, OFF}, ['(' - 0x20] = {0x0a, ON},
    [')' - 0x20] = {0x0b, ON},  ['*' - 0x20] = {0x09, ON},   ['+' - 0x20] = {0x0d, ON},
    [',' - 0x20] = {0x33, OFF}, ['-' - 0x20] = {0x0c, OFF},  ['.' - 0x20] = {0x34, OFF},
    ['/' - 0x20] = {0x35, OFF}, ['0' - 0x20] = {0x0b, OFF},  ['1' - 0x20] = {0x02, OFF},
    ['2' - 0x20] = {0x03, OFF}, ['3' - 0x20] = {0x04, OFF},  ['4' - 0x20] = {0x05, OFF},
    ['5' - 0x20] = {0x06, OFF}, ['6' - 0x20] = {0x07, OFF},  ['7' - 0x20] = {0x08, OFF},
    ['8' - 0x20] = {0x09, OFF}, ['9' - 0x20] = {0x0a, OFF},  [':' - 0x20] = {0x27, ON},
    [';' - 0x20] = {0x27, OFF}, ['<' - 0x20] = {0x33, ON},   ['=' - 0x20] = {0x0d, OFF},
    ['>' - 0x20] = {0x34, ON},  ['?' - 0x20] = {0x35, ON},   ['@' - 0x20] = {0x03, ON},
    ['[' - 0x20] = {0x1a, OFF}, ['\\' - 0x20] = {0x2b, OFF}, [']' - 0x20] = {0x1b, OFF},
    ['^' - 0x20] = {0x07, ON},  ['_' - 0x20] = {0x0c, ON},   ['`' - 0x20] = {0x29, OFF},
    ['{' - 0x20] = {0x1a, ON},  ['|' - 0x20] = {0x2b, ON},   ['}' - 0x20] = {0x1b, ON},
    ['~' - 0x20] = {0x29, ON},
};

/* The letter keys a..z in alphabetical order. */
static const uint8_t letter_qnum[26] = {
    0x1e, 0x30, 0x2e, 0x20, 0x12, 0x21, 0x22, 0x23, 0x17, 0x24, 0x25, 0x26, 0x32,
    0x31, 0x18, 0x19, 0x10, 0x13, 0x1f, 0x14, 0x16, 0x2f, 0x11, 0x2d, 0x15, 0x2c,
};

/* Every non-character key: keysym, qnum and name. */
struct named_key {
	uint32_t keysym;
	uint16_t qnum;
	const char *name;
};

static const struct named_key named_keys[] = {
    {0xff08, 0x0e, "BackSpace"},
    {0xff09, 0x0f, "Tab"},
    {0xfe20, 0x0f, "ISO_Left_Tab"},
    {0xff0d, 0x1c, "Return"},
    {0xff13, 0xc6, "Pause"},
    {0xff14, 0x46, "Scroll_Lock"},
    {0xff15, 0x54, "Sys_Req"},
    {0xff1b, 0x01, "Escape"},
    {0xff50, 0xc7, "Home"},
    {0xff51, 0xcb, "Left"},
    {0xff52, 0xc8, "Up"},
    {0xff53, 0xcd, "Right"},
    {0xff54, 0xd0, "Down"},
    {0xff55, 0xc9, "Prior"},
    {0xff55, 0xc9, "Page_Up"},
    {0xff56, 0xd1, "Next"},
    {0xff56, 0xd1, "Page_Down"},
    {0xff57, 0xcf, "End"},
    {0xff61, 0xb7, "Print"},
    {0xff63, 0xd2, "Insert"},
    {0xff67, 0xdd, "Menu"},
    {0xff7f, 0x45, "Num_Lock"},
    {0xff8d, 0x9c, "KP_Enter"},
    {0xff95, 0x47, "KP_Home"},
    {0xff96, 0x4b, "KP_Left"},
    {0xff97, 0x48, "KP_Up"},
    {0xff98, 0x4d, "KP_Right"},
    {0xff99, 0x50, "KP_Down"},
    {0xff9a, 0x49, "KP_Prior"},
    {0xff9a, 0x49, "KP_Page_Up"},
    {0xff9b, 0x51, "KP_Next"},
    {0xff9b, 0x51, "KP_Page_Down"},
    {0xff9c, 0x4f, "KP_End"},
    {0xff9d, 0x4c, "KP_Begin"},
    {0xff9e, 0x52, "KP_Insert"},
    {0xff9f, 0x53, "KP_Delete"},
    {0xffaa, 0x37, "KP_Multiply"},
    {0xffab, 0x4e, "KP_Add"},
    {0xffac, 0x53, "KP_Separator"},
    {0xffad, 0x4a, "KP_Subtract"},
    {0xffae, 0x53, "KP_Decimal"},
    {0xffaf, 0xb5, "KP_Divide"},
    {0xffb0, 0x52, "KP_0"},
    {0xffb1, 0x4f, "KP_1"},
    {0xffb2, 0x50, "KP_2"},
    {0xffb3, 0x51, "KP_3"},
    {0xffb4, 0x4b, "KP_4"},
    {0xffb5, 0x4c, "KP_5"},
    {0xffb6, 0x4d, "KP_6"},
    {0xffb7, 0x47, "KP_7"},
    {0xffb8, 0x48, "KP_8"},
    {0xffb9, 0x49, "KP_9"},
    {0xffbe, 0x3b, "F1"},
    {0xffbf, 0x3c, "F2"},
    {0xffc0, 0x3d, "F3"},
    {0xffc1, 0x3e, "F4"},
    {0xffc2, 0x3f, "F5"},
    {0xffc3, 0x40, "F6"},
    {0xffc4, 0x41, "F7"},
    {0xffc5, 0x42, "F8"},
    {0xffc6, 0x43, "F9"},
    {0xffc7, 0x44, "F10"},
    {0xffc8, 0x57, "F11"},
    {0xffc9, 0x58, "F12"},
    {0xffe1, KEYMAP_QNUM_SHIFT_L, "Shift_L"},
    {0xffe2, KEYMAP_QNUM_SHIFT_R, "Shift_R"},
    {0xffe3, 0x1d, "Control_L"},
    {0xffe4, 0x9d, "Control_R"},
    {0xffe5, 0x3a, "Caps_Lock"},
    {0xffe7, 0xdb, "Meta_L"},
    {0xffe8, 0xdc, "Meta_R"},
    {0xffe9, 0x38, "Alt_L"},
    {0xffea, 0xb8, "Alt_R"},
    {0xfe03, 0xb8, "ISO_Level3_Shift"},
    {0xffeb, 0xdb, "Super_L"},
    {0xffec, 0xdc, "Super_R"},
    {0xffff, 0xd3, "Delete"},
};

/* keysymdef.h's names of the printable ASCII characters that are not
 * letters or digits (as `key` names). */
struct char_name {
	char c;
	const char *name;
};

static const struct char_name char_names[] = {
    {' ', "space"},      {'!', "exclam"},       {'"', "quotedbl"},    {'#', "numbersign"},
    {'$', "dollar"},     {'%', "percent"},      {'&', "ampersand"},   {'\'', "apostrophe"},
    {'(', "parenleft"},  {')', "parenright"},   {'*', "asterisk"},    {'+', "plus"},
    {',', "comma"},      {'-', "minus"},        {'.', "period"},      {'/', "slash"},
    {':', "colon"},      {';', "semicolon"},    {'<', "less"},        {'=', "equal"},
    {'>', "greater"},    {'?', "question"},     {'@', "at"},          {'[', "bracketleft"},
    {'\\', "backslash"}, {']', "bracketright"}, {'^', "asciicircum"}, {'_', "underscore"},
    {'`', "grave"},      {'{', "braceleft"},    {'|', "bar"},         {'}', "braceright"},
    {'~', "asciitilde"},
};

bool keymap_lookup(uint32_t keysym, struct keymap_key *k)
{
	if (keysym >= 'a' && keysym <= 'z') {
		*k = (struct keymap_key){letter_qnum[keysym - 'a'], OFF};
		return true;
	}
	if (keysym >= 'A' && keysym <= 'Z') {
		*k = (struct keymap_key){letter_qnum[keysym - 'A'], ON};
		return true;
	}
	if (keysym >= 0x20 && keysym < 0x7f) {
		*k = ascii_keys[keysym - 0x20];
		return k->qnum != 0;
	}
	for (size_t i = 0; i < sizeof(named_keys) / sizeof(named_keys[0]); i++) {
		if (named_keys[i].keysym == keysym) {
			*k = (struct keymap_key){named_keys[i].qnum, ANY};
			return true;
		}
	}
	return false;
}

uint32_t keymap_keysym_by_name(const char *name)
{
	if (name[0] > 0x20 && name[0] < 0x7f && name[1] == '\0')
		return (unsigned char)name[0];
	for (size_t i = 0; i < sizeof(named_keys) / sizeof(named_keys[0]); i++) {
		if (strcmp(named_keys[i].name, name) == 0)
			return named_keys[i].keysym;
	}
	for (size_t i = 0; i < sizeof(char_names) / sizeof(char_names[0]); i++) {
		if (strcmp(char_names[i].name, name) == 0)
			return (unsigned char)char_names[i].c;
	}
	return 0;
}

uint32_t keymap_keysym_of_char(unsigned char c)
{
	if (c == '\n')
		return 0xff0d;
	if (c == '\t')
		return 0xff09;
	if (c >= 0x20 && c < 0x7f)
		return c;
	return 0;
}
