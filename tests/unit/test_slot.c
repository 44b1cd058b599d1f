/* Slots' host ids (src/lib/slot.h): every slot's 65536 ids lie inside one of
 * the two ranges, clear of systemd's foreign range and of (uid_t)-1 and -2,
 * and no two slots overlap. */
#include <stdint.h>

#include "slot.h"
#include "tap.h"

int main(void) {
  is_int((long long)hutch_slot_uid_base(0), 0x70000000, "slot 0 starts the low range");
  is_int((long long)hutch_slot_uid_base(3999), 0x70000000 + 3999LL * 65536, "slot 3999 as before");
  is_int((long long)hutch_slot_uid_base(4093), 0x7FFD0000,
         "slot 4093 is the last below 0x7FFE0000");
  is_int((long long)hutch_slot_uid_base(4094), 0x80000000LL, "slot 4094 starts the high range");
  is_int((long long)hutch_slot_uid_base(5000), 0x80000000LL + 906LL * 65536, "slot 5000");
  uint64_t last = hutch_slot_uid_base(HUTCH_SLOTS - 1) + (uint64_t)HUTCH_ID_RANGE - 1;
  is_int((long long)last, 0xFFFEFFFFLL, "the last slot's last id is 0xFFFEFFFF");
  ok(HUTCH_SLOTS >= 6000, "room for more than 5000 sandboxes (%u slots)", HUTCH_SLOTS);
  bool inside = true, ordered = true;
  for (unsigned s = 0; s < HUTCH_SLOTS; s++) {
    uint64_t lo = hutch_slot_uid_base(s), hi = lo + HUTCH_ID_RANGE - 1;
    if (!((lo >= 0x70000000u && hi < 0x7FFE0000u) || (lo >= 0x80000000u && hi < 0xFFFF0000u)))
      inside = false;
    if (s > 0 && lo < (uint64_t)hutch_slot_uid_base(s - 1) + HUTCH_ID_RANGE)
      ordered = false;
  }
  ok(inside, "every slot's ids inside 0x70000000..0x7FFDFFFF or 0x80000000..0xFFFEFFFF");
  ok(ordered, "no two slots share an id");
  return done_testing();
}
